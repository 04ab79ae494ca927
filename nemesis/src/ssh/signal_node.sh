node_procs() { { grep -lsxzF @TAG@ /proc/[0-9]*/environ | cut -d/ -f3; find /proc/[0-9]* -maxdepth 1 -name cwd \( -lname @DIR_QUOTED@ -o -lname @DIR_QUOTED@'/*' \) 2>/dev/null | cut -d/ -f3; if [ -n "$p" ]; then ps -e -o pid= -o ppid= 2>/dev/null | awk -v r="$p" '{pp[$1]=$2} END {for (q in pp) {a=q; for (i=0; i<32 && a>1; i++) {a=pp[a]; if (a==r) {print q; break}}}}'; fi; } | sort -u | grep -vx -e "$$" -e "$p" || :; }
f=@DIR@/pid
p=
if [ -f "$f" ]; then
p=$(sed -n 1p "$f" 2>/dev/null || :)
s=$(sed -n 2p "$f" 2>/dev/null || :)
if [ -z "$p" ] || [ -z "$s" ] || [ "$(@START_TIME@)" != "$s" ]; then rm -f "$f"; p=; fi
fi
if [ -n "$p" ]; then
m=$(node_procs)
@SEND@
else @MISSING@; fi
