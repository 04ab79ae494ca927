//! The hook code run in this very process against a control page: what a patched target
//! computes, checked against the page's own formula, without ptrace.

#![cfg(target_arch = "x86_64")]

use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::num::NonZeroUsize;
use vclock::page::{now_ns, CLOCK_MONOTONIC, CLOCK_REALTIME};
use vclock::{hook, ClockScope, ControlPage};

type ClockGettime = unsafe extern "C" fn(i32, *mut libc::timespec) -> i32;
type Gettimeofday = unsafe extern "C" fn(*mut libc::timeval, *mut libc::c_void) -> i32;
type Time = unsafe extern "C" fn(*mut libc::time_t) -> libc::time_t;

/// This process's vDSO clock_gettime: its address and first bytes.
fn own_clock_gettime() -> (u64, Vec<u8>) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps.lines().find(|l| l.ends_with("[vdso]")).unwrap();
    let range = line.split_whitespace().next().unwrap();
    let (a, b) = range.split_once('-').unwrap();
    let start = u64::from_str_radix(a, 16).unwrap();
    let end = u64::from_str_radix(b, 16).unwrap();
    // Safety: the kernel maps the vDSO readable for the life of the process.
    let image = unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) };
    let sym = vclock::elf::find_symbol(image, "__vdso_clock_gettime")
        .unwrap()
        .unwrap();
    let at = sym.offset as usize;
    (start + sym.offset, image[at..at + 32].to_vec())
}

/// The hook's code in an executable page of this process, pointed at `page`.
struct Code {
    base: std::ptr::NonNull<libc::c_void>,
}

impl Code {
    /// With `through_vdso`, `real` is a trampoline into this process's own vDSO
    /// clock_gettime (where its entry can be relocated); else the system call.
    fn load(page: &ControlPage, through_vdso: bool) -> Code {
        let len = NonZeroUsize::new(4096).unwrap();
        // Safety: a fresh private anonymous page, written before it is made executable.
        unsafe {
            let base = mmap_anonymous(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
            .unwrap();
            let code_addr = base.as_ptr() as u64;
            let (entry, entry_bytes) = if through_vdso {
                own_clock_gettime()
            } else {
                (0, vec![0xcc; 32]) // nothing relocatable: the system call
            };
            let (bytes, fast) =
                hook::code_page(page.as_ptr() as u64, code_addr, entry, &entry_bytes);
            if through_vdso && !fast {
                eprintln!("NOTE: this kernel's vDSO entry is not relocatable; the system call");
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.as_ptr() as *mut u8, bytes.len());
            nix::sys::mman::mprotect(base, 4096, ProtFlags::PROT_READ | ProtFlags::PROT_EXEC)
                .unwrap();
            Code { base }
        }
    }

    fn at<T: Copy>(&self, offset: usize) -> T {
        assert_eq!(std::mem::size_of::<T>(), 8);
        let p = unsafe { (self.base.as_ptr() as *const u8).add(offset) };
        unsafe { std::mem::transmute_copy(&p) }
    }

    fn clock_gettime(&self, id: i32) -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let f: ClockGettime = self.at(hook::CLOCK_GETTIME);
        assert_eq!(unsafe { f(id, &mut ts) }, 0);
        assert!((0..1_000_000_000).contains(&ts.tv_nsec), "{}", ts.tv_nsec);
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }

    fn gettimeofday(&self) -> i64 {
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        let f: Gettimeofday = self.at(hook::GETTIMEOFDAY);
        assert_eq!(unsafe { f(&mut tv, std::ptr::null_mut()) }, 0);
        assert!((0..1_000_000).contains(&tv.tv_usec), "{}", tv.tv_usec);
        tv.tv_sec * 1_000_000_000 + tv.tv_usec * 1000
    }

    fn time(&self) -> (i64, i64) {
        let f: Time = self.at(hook::TIME);
        let mut out: libc::time_t = 0;
        let r = unsafe { f(&mut out) };
        (r, out)
    }
}

impl Drop for Code {
    fn drop(&mut self) {
        let _ = unsafe { munmap(self.base, 4096) };
    }
}

const S: i64 = 1_000_000_000;
/// Slack for the time between our reading and the hook's.
const SLACK_NS: i64 = 50_000_000;

fn near(got: i64, want: i64, what: &str) {
    assert!(
        (got - want).abs() < SLACK_NS,
        "{what}: got {got}, want {want} (off by {} ms)",
        (got - want) / 1_000_000
    );
}

#[test]
fn true_page_gives_true_clocks() {
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("clock.page")).unwrap();
    for fast in [true, false] {
        let code = Code::load(&page, fast);
        near(code.clock_gettime(0), now_ns(CLOCK_REALTIME), "realtime");
        near(code.clock_gettime(1), now_ns(CLOCK_MONOTONIC), "monotonic");
        near(code.gettimeofday(), now_ns(CLOCK_REALTIME), "gettimeofday");
        let (r, out) = code.time();
        assert_eq!(r, out);
        assert!((r - now_ns(CLOCK_REALTIME) / S).abs() <= 1);
    }
}

/// Data-driven: (scope, offset s, rate) -> what each clock shows after 200 ms.
#[test]
fn offsets_and_rates_per_scope() {
    let cases = [
        (ClockScope::Wall, 3600, 1.0),
        (ClockScope::Wall, -7200, 1.0),
        (ClockScope::All, 10, 1.0),
        (ClockScope::All, 0, 4.0),
        (ClockScope::Wall, 5, 0.5),
    ];
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("clock.page")).unwrap();
    for fast in [true, false] {
        let code = Code::load(&page, fast);
        for (scope, offset_s, rate) in cases {
            page.reset();
            page.change(scope, |_, _| (offset_s * S, rate));
            let start_rt = now_ns(CLOCK_REALTIME);
            let start_mono = now_ns(CLOCK_MONOTONIC);
            std::thread::sleep(std::time::Duration::from_millis(200));
            let el_rt = now_ns(CLOCK_REALTIME) - start_rt;
            let el_mono = now_ns(CLOCK_MONOTONIC) - start_mono;
            let want_rt = start_rt + offset_s * S + (el_rt as f64 * rate) as i64;
            let got_rt = code.clock_gettime(0);
            let what = format!("{scope:?} {offset_s} s x{rate} (through the vDSO: {fast})");
            near(got_rt, want_rt, &format!("realtime, {what}"));
            near(
                code.gettimeofday(),
                want_rt,
                &format!("gettimeofday, {what}"),
            );
            assert!((code.time().0 - want_rt / S).abs() <= 1, "time, {what}");
            // The page's own account of the offset agrees with the hook's.
            near(
                page.offset_ns(0),
                got_rt - now_ns(CLOCK_REALTIME),
                &format!("page, {what}"),
            );
            near(
                page.applied_ns(0),
                page.offset_ns(0),
                &format!("applied, {what}"),
            );
            let got_mono = code.clock_gettime(CLOCK_MONOTONIC as i32);
            let want_mono = match scope {
                ClockScope::Wall => start_mono + el_mono,
                ClockScope::All => start_mono + offset_s * S + (el_mono as f64 * rate) as i64,
            };
            near(got_mono, want_mono, &format!("monotonic, {what}"));
            // CPU-time clocks and ids past the table run true whatever the page says.
            let cpu = code.clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID);
            assert!(cpu < 1000 * S, "{what}: cpu time {cpu}");
        }
    }
}

#[test]
fn a_rate_switch_never_jumps() {
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("clock.page")).unwrap();
    let code = Code::load(&page, true);
    page.change(ClockScope::All, |off, _| (off, 4.0));
    std::thread::sleep(std::time::Duration::from_millis(300));
    for rate in [0.25, 1.0, 2.0] {
        let before = code.clock_gettime(1);
        page.change(ClockScope::All, |off, _| (off, rate));
        let after = code.clock_gettime(1);
        // Continuous: the clock moved forward by microseconds, not by the ~0.9 s gained.
        assert!(after >= before, "x{rate}: went back {} ns", before - after);
        assert!(
            after - before < 5_000_000,
            "x{rate}: jumped {} ns",
            after - before
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn errors_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let page = ControlPage::create(&dir.path().join("clock.page")).unwrap();
    for fast in [true, false] {
        let code = Code::load(&page, fast);
        let f: ClockGettime = code.at(hook::CLOCK_GETTIME);
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // An id no clock has: the kernel's -EINVAL, as the vDSO would return it.
        assert_eq!(unsafe { f(12345, &mut ts) }, -libc::EINVAL);
        // gettimeofday with a time zone goes through the system call, and fills it.
        let g: Gettimeofday = code.at(hook::GETTIMEOFDAY);
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        let mut tz = [0i32; 2];
        assert_eq!(unsafe { g(&mut tv, tz.as_mut_ptr().cast()) }, 0);
        assert!((tv.tv_sec - now_ns(CLOCK_REALTIME) / S).abs() <= 1);
        assert_eq!(unsafe { g(std::ptr::null_mut(), std::ptr::null_mut()) }, 0);
    }
}
