# The hooks lockpick places in a patched process (vclock/src/hook.rs holds these bytes).
#
# Layout: two 8-byte slots, then code. Each hook reads the true clock through `real` (the
# vDSO's own clock_gettime, called through its relocated entry, or the raw system call where
# that entry could not be relocated), then moves it by the control page's setting for that
# clock id (see adjust).
        .intel_syntax noprefix
        .text
control:                        # 0x00: the control page's address, written at injection
        .quad 0
real:                           # 0x08: a function with clock_gettime's contract that reads
        .quad 0                 #       the true clock, written at injection

clock_gettime_hook:             # int clock_gettime(clockid_t id = edi, struct timespec *ts = rsi)
        push rdi
        push rsi
        sub rsp, 8              # the stack 16-byte aligned at the call, as the ABI wants
        call [rip + real]
        add rsp, 8
        pop rsi
        pop rdi
        test eax, eax
        jnz 9f                  # an error (-errno) goes back as the real call gave it
        cmp edi, 16
        jae 9f                  # unsigned: ids past the table and negative (CPU-time) ids run true
        test rsi, rsi
        jz 9f
        mov rax, [rsi]
        imul rax, rax, 1000000000
        add rax, [rsi + 8]      # rax = true ns
        mov r8d, edi
        call adjust
        cqo
        mov rcx, 1000000000
        idiv rcx                # rax = s, rdx = ns (signed: floor fix below)
        test rdx, rdx
        jns 1f
        add rdx, rcx
        dec rax
1:      mov [rsi], rax
        mov [rsi + 8], rdx
        xor eax, eax
9:      ret

gettimeofday_hook:              # int gettimeofday(struct timeval *tv = rdi, struct timezone *tz = rsi)
        test rsi, rsi
        jnz 5f                  # a time zone asked for (obsolete): the system call fills it
        test rdi, rdi
        jz 8f                   # nothing asked for
        push rdi
        call realtime_ns        # rax = true ns
        pop rdi
        jmp 6f
5:      mov eax, 96             # SYS_gettimeofday
        syscall
        test rax, rax
        jnz 9f
        test rdi, rdi
        jz 9f
        mov rax, [rdi]
        imul rax, rax, 1000000000
        mov rcx, [rdi + 8]
        imul rcx, rcx, 1000
        add rax, rcx            # rax = true ns (to the microsecond)
6:      xor r8d, r8d            # CLOCK_REALTIME's slot
        call adjust
        cqo
        mov rcx, 1000
        idiv rcx                # rax = us
        cqo
        mov rcx, 1000000
        idiv rcx                # rax = s, rdx = us
        test rdx, rdx
        jns 1f
        add rdx, rcx
        dec rax
1:      mov [rdi], rax
        mov [rdi + 8], rdx
8:      xor eax, eax
9:      ret

time_hook:                      # time_t time(time_t *t = rdi)
        push rdi
        call realtime_ns        # rax = true ns (time(2) has only whole seconds)
        xor r8d, r8d
        call adjust
        pop rsi                 # t
        cqo
        mov rcx, 1000000000
        idiv rcx
        test rdx, rdx
        jns 1f
        dec rax
1:      test rsi, rsi
        jz 9f
        mov [rsi], rax
9:      ret

realtime_ns:                    # rax = the true CLOCK_REALTIME in ns, through `real`
        sub rsp, 24             # a timespec; the stack aligned at the call (callers push one word)
        xor edi, edi            # CLOCK_REALTIME
        mov rsi, rsp
        call [rip + real]
        mov rax, [rsp]
        imul rax, rax, 1000000000
        add rax, [rsp + 8]
        add rsp, 24
        ret

raw_clock_gettime:              # the fallback `real`: the system call itself
        mov eax, 228            # SYS_clock_gettime
        syscall
        ret

# rax = true ns of clock r8 (0..15) -> rax = the faked ns.
# fake = true + off + ((true - t0) * excess_q32) >> 32, read under the page's seqlock.
# Clobbers rcx, rdx, r8-r11; keeps rbx (saved), rdi, rsi.
adjust:
        push rbx
        mov r9, rax             # true ns
        mov r11, [rip + control]
        mov r10, r8
        shl r10, 5
        lea r10, [r11 + r10 + 64]       # params of the clock: t0, off, excess_q32
        shl r8, 6
        lea r8, [r11 + r8 + 2048]       # where the offset applied is reported
        mov ebx, 1048576        # a bound on retries while the page is being written
2:      mov ecx, [r11 + 8]      # seq
        mov rax, r9
        sub rax, [r10]
        imul qword ptr [r10 + 16]       # rdx:rax = (true - t0) * excess_q32
        shrd rax, rdx, 32
        add rax, [r10 + 8]
        add rax, r9
        test ecx, 1
        jnz 3f                  # odd: a write is under way
        cmp ecx, [r11 + 8]
        je 4f                   # unchanged: what was read is consistent
3:      pause
        dec ebx
        jnz 2b
4:      mov rcx, rax
        sub rcx, r9
        mov [r8], rcx           # the offset this read applied
        pop rbx
        ret
