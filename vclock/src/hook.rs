//! The code lockpick places in a target: a hook for each vDSO clock function, which reads the
//! true clock and applies the offset and rate the control page holds for that clock id.
//!
//! The bytes below are `hook.S` assembled (`as --64`), each instruction with its listing. A
//! test re-assembles `hook.S` where `as` is installed and compares, and others run the bytes
//! in this process against a control page, so the listing, the source and the behaviour agree.
//!
//! The true clock is read through the `real` slot: a function with `clock_gettime`'s
//! contract. Where the vDSO's `clock_gettime` begins with instructions that can run anywhere
//! (the usual frame set-up: pushes, register moves, stack adjustments; [`relocatable_prefix`]),
//! those instructions are copied into a trampoline in the code page followed by a jump back
//! into the vDSO past them, and `real` is the trampoline: a patched read costs the vDSO's own
//! read plus a few nanoseconds. Otherwise `real` is [`RAW_CLOCK_GETTIME`], the system call
//! itself (slower, correct on any kernel). The vDSO's body cannot simply be copied whole: it
//! reads its data page (`[vvar]`) at RIP-relative addresses.
//!
//! The hooks keep the C calling convention: arguments in rdi, rsi; result in rax; they clobber
//! only caller-saved registers (rax, rcx, rdx, rsi, rdi, r8-r11), save rbx, align the stack for
//! their own calls, and use a few dozen bytes of the caller's stack beyond what the vDSO's own
//! function uses, so Go's runtime (which calls the vDSO on its system stack with the C
//! convention) is served like C.

/// Offset of the 8-byte slot that holds the control page's address.
pub const CONTROL_SLOT: usize = 0x00;
/// Offset of the 8-byte slot that holds the address of the true-clock reader.
pub const REAL_SLOT: usize = 0x08;
/// Entry of the `clock_gettime(clockid_t, struct timespec *)` hook.
pub const CLOCK_GETTIME: usize = 0x10;
/// Entry of the `gettimeofday(struct timeval *, struct timezone *)` hook.
pub const GETTIMEOFDAY: usize = 0x67;
/// Entry of the `time(time_t *)` hook.
pub const TIME: usize = 0xd8;
/// The system-call reader, `real` where the vDSO's entry cannot be relocated.
pub const RAW_CLOCK_GETTIME: usize = 0x128;
/// Where the trampoline (the relocated first instructions of the vDSO's clock_gettime and a
/// jump back) goes.
pub const TRAMPOLINE: usize = 0x400;
/// Where the injector puts the control file's path (past the code, in the same page, before
/// the page is made read-only and executable).
pub const PATH_OFFSET: usize = 0x800;
/// The patch written over each vDSO entry is this long, so a trampoline must relocate at least
/// this much.
pub const ENTRY_BYTES: usize = 12;

/// The code, from offset 0 (the two slots zero).
#[rustfmt::skip]
pub const CODE: &[u8] = &[
    // control, real: written at injection
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    // clock_gettime_hook
    0x57, // 0x010: push rdi
    0x56, // 0x011: push rsi
    0x48, 0x83, 0xec, 0x08, // 0x012: sub rsp,0x8
    0xff, 0x15, 0xec, 0xff, 0xff, 0xff, // 0x016: call QWORD PTR [rip+0xffffffffffffffec]
    0x48, 0x83, 0xc4, 0x08, // 0x01c: add rsp,0x8
    0x5e, // 0x020: pop rsi
    0x5f, // 0x021: pop rdi
    0x85, 0xc0, // 0x022: test eax,eax
    0x75, 0x40, // 0x024: jne 66
    0x83, 0xff, 0x10, // 0x026: cmp edi,0x10
    0x73, 0x3b, // 0x029: jae 66
    0x48, 0x85, 0xf6, // 0x02b: test rsi,rsi
    0x74, 0x36, // 0x02e: je 66
    0x48, 0x8b, 0x06, // 0x030: mov rax,QWORD PTR [rsi]
    0x48, 0x69, 0xc0, 0x00, 0xca, 0x9a, 0x3b, // 0x033: imul rax,rax,0x3b9aca00
    0x48, 0x03, 0x46, 0x08, // 0x03a: add rax,QWORD PTR [rsi+0x8]
    0x41, 0x89, 0xf8, // 0x03e: mov r8d,edi
    0xe8, 0xea, 0x00, 0x00, 0x00, // 0x041: call 130
    0x48, 0x99, // 0x046: cqo
    0x48, 0xc7, 0xc1, 0x00, 0xca, 0x9a, 0x3b, // 0x048: mov rcx,0x3b9aca00
    0x48, 0xf7, 0xf9, // 0x04f: idiv rcx
    0x48, 0x85, 0xd2, // 0x052: test rdx,rdx
    0x79, 0x06, // 0x055: jns 5d
    0x48, 0x01, 0xca, // 0x057: add rdx,rcx
    0x48, 0xff, 0xc8, // 0x05a: dec rax
    0x48, 0x89, 0x06, // 0x05d: mov QWORD PTR [rsi],rax
    0x48, 0x89, 0x56, 0x08, // 0x060: mov QWORD PTR [rsi+0x8],rdx
    0x31, 0xc0, // 0x064: xor eax,eax
    0xc3, // 0x066: ret
    // gettimeofday_hook
    0x48, 0x85, 0xf6, // 0x067: test rsi,rsi
    0x75, 0x0e, // 0x06a: jne 7a
    0x48, 0x85, 0xff, // 0x06c: test rdi,rdi
    0x74, 0x64, // 0x06f: je d5
    0x57, // 0x071: push rdi
    0xe8, 0x8d, 0x00, 0x00, 0x00, // 0x072: call 104
    0x5f, // 0x077: pop rdi
    0xeb, 0x29, // 0x078: jmp a3
    0xb8, 0x60, 0x00, 0x00, 0x00, // 0x07a: mov eax,0x60
    0x0f, 0x05, // 0x07f: syscall
    0x48, 0x85, 0xc0, // 0x081: test rax,rax
    0x75, 0x51, // 0x084: jne d7
    0x48, 0x85, 0xff, // 0x086: test rdi,rdi
    0x74, 0x4c, // 0x089: je d7
    0x48, 0x8b, 0x07, // 0x08b: mov rax,QWORD PTR [rdi]
    0x48, 0x69, 0xc0, 0x00, 0xca, 0x9a, 0x3b, // 0x08e: imul rax,rax,0x3b9aca00
    0x48, 0x8b, 0x4f, 0x08, // 0x095: mov rcx,QWORD PTR [rdi+0x8]
    0x48, 0x69, 0xc9, 0xe8, 0x03, 0x00, 0x00, // 0x099: imul rcx,rcx,0x3e8
    0x48, 0x01, 0xc8, // 0x0a0: add rax,rcx
    0x45, 0x31, 0xc0, // 0x0a3: xor r8d,r8d
    0xe8, 0x85, 0x00, 0x00, 0x00, // 0x0a6: call 130
    0x48, 0x99, // 0x0ab: cqo
    0x48, 0xc7, 0xc1, 0xe8, 0x03, 0x00, 0x00, // 0x0ad: mov rcx,0x3e8
    0x48, 0xf7, 0xf9, // 0x0b4: idiv rcx
    0x48, 0x99, // 0x0b7: cqo
    0x48, 0xc7, 0xc1, 0x40, 0x42, 0x0f, 0x00, // 0x0b9: mov rcx,0xf4240
    0x48, 0xf7, 0xf9, // 0x0c0: idiv rcx
    0x48, 0x85, 0xd2, // 0x0c3: test rdx,rdx
    0x79, 0x06, // 0x0c6: jns ce
    0x48, 0x01, 0xca, // 0x0c8: add rdx,rcx
    0x48, 0xff, 0xc8, // 0x0cb: dec rax
    0x48, 0x89, 0x07, // 0x0ce: mov QWORD PTR [rdi],rax
    0x48, 0x89, 0x57, 0x08, // 0x0d1: mov QWORD PTR [rdi+0x8],rdx
    0x31, 0xc0, // 0x0d5: xor eax,eax
    0xc3, // 0x0d7: ret
    // time_hook
    0x57, // 0x0d8: push rdi
    0xe8, 0x26, 0x00, 0x00, 0x00, // 0x0d9: call 104
    0x45, 0x31, 0xc0, // 0x0de: xor r8d,r8d
    0xe8, 0x4a, 0x00, 0x00, 0x00, // 0x0e1: call 130
    0x5e, // 0x0e6: pop rsi
    0x48, 0x99, // 0x0e7: cqo
    0x48, 0xc7, 0xc1, 0x00, 0xca, 0x9a, 0x3b, // 0x0e9: mov rcx,0x3b9aca00
    0x48, 0xf7, 0xf9, // 0x0f0: idiv rcx
    0x48, 0x85, 0xd2, // 0x0f3: test rdx,rdx
    0x79, 0x03, // 0x0f6: jns fb
    0x48, 0xff, 0xc8, // 0x0f8: dec rax
    0x48, 0x85, 0xf6, // 0x0fb: test rsi,rsi
    0x74, 0x03, // 0x0fe: je 103
    0x48, 0x89, 0x06, // 0x100: mov QWORD PTR [rsi],rax
    0xc3, // 0x103: ret
    // realtime_ns
    0x48, 0x83, 0xec, 0x18, // 0x104: sub rsp,0x18
    0x31, 0xff, // 0x108: xor edi,edi
    0x48, 0x89, 0xe6, // 0x10a: mov rsi,rsp
    0xff, 0x15, 0xf5, 0xfe, 0xff, 0xff, // 0x10d: call QWORD PTR [rip+0xfffffffffffffef5]
    0x48, 0x8b, 0x04, 0x24, // 0x113: mov rax,QWORD PTR [rsp]
    0x48, 0x69, 0xc0, 0x00, 0xca, 0x9a, 0x3b, // 0x117: imul rax,rax,0x3b9aca00
    0x48, 0x03, 0x44, 0x24, 0x08, // 0x11e: add rax,QWORD PTR [rsp+0x8]
    0x48, 0x83, 0xc4, 0x18, // 0x123: add rsp,0x18
    0xc3, // 0x127: ret
    // raw_clock_gettime
    0xb8, 0xe4, 0x00, 0x00, 0x00, // 0x128: mov eax,0xe4
    0x0f, 0x05, // 0x12d: syscall
    0xc3, // 0x12f: ret
    // adjust
    0x53, // 0x130: push rbx
    0x49, 0x89, 0xc1, // 0x131: mov r9,rax
    0x4c, 0x8b, 0x1d, 0xc5, 0xfe, 0xff, 0xff, // 0x134: mov r11,QWORD PTR [rip+0xfffffffffffffec5]
    0x4d, 0x89, 0xc2, // 0x13b: mov r10,r8
    0x49, 0xc1, 0xe2, 0x05, // 0x13e: shl r10,0x5
    0x4f, 0x8d, 0x54, 0x13, 0x40, // 0x142: lea r10,[r11+r10*1+0x40]
    0x49, 0xc1, 0xe0, 0x06, // 0x147: shl r8,0x6
    0x4f, 0x8d, 0x84, 0x03, 0x00, 0x08, 0x00, // 0x14b: lea r8,[r11+r8*1+0x800]
    0x00, // 0x152: 
    0xbb, 0x00, 0x00, 0x10, 0x00, // 0x153: mov ebx,0x100000
    0x41, 0x8b, 0x4b, 0x08, // 0x158: mov ecx,DWORD PTR [r11+0x8]
    0x4c, 0x89, 0xc8, // 0x15c: mov rax,r9
    0x49, 0x2b, 0x02, // 0x15f: sub rax,QWORD PTR [r10]
    0x49, 0xf7, 0x6a, 0x10, // 0x162: imul QWORD PTR [r10+0x10]
    0x48, 0x0f, 0xac, 0xd0, 0x20, // 0x166: shrd rax,rdx,0x20
    0x49, 0x03, 0x42, 0x08, // 0x16b: add rax,QWORD PTR [r10+0x8]
    0x4c, 0x01, 0xc8, // 0x16f: add rax,r9
    0xf7, 0xc1, 0x01, 0x00, 0x00, 0x00, // 0x172: test ecx,0x1
    0x75, 0x06, // 0x178: jne 180
    0x41, 0x3b, 0x4b, 0x08, // 0x17a: cmp ecx,DWORD PTR [r11+0x8]
    0x74, 0x06, // 0x17e: je 186
    0xf3, 0x90, // 0x180: pause
    0xff, 0xcb, // 0x182: dec ebx
    0x75, 0xd2, // 0x184: jne 158
    0x48, 0x89, 0xc1, // 0x186: mov rcx,rax
    0x4c, 0x29, 0xc9, // 0x189: sub rcx,r9
    0x49, 0x89, 0x08, // 0x18c: mov QWORD PTR [r8],rcx
    0x5b, // 0x18f: pop rbx
    0xc3, // 0x190: ret
];

/// How many bytes at the start of `code` are whole instructions that behave the same at any
/// address, covering at least [`ENTRY_BYTES`]; `None` if an instruction is not one this
/// short list knows (then the system call reads the true clock instead).
///
/// Known: `endbr64`; `push` of a register; `mov`, `xor`, `test` between registers;
/// `and`/`sub`/`add`/`cmp` of a register with an immediate. Nothing relative to the
/// instruction pointer (no branch, no RIP-relative operand) is in the list.
pub fn relocatable_prefix(code: &[u8]) -> Option<usize> {
    let mut at = 0;
    // Each step consumes at least one byte; the bound is the slice itself.
    while at < ENTRY_BYTES {
        at += instruction_len(code.get(at..)?)?;
    }
    Some(at)
}

/// The length of one instruction of the known list at the start of `b`.
fn instruction_len(b: &[u8]) -> Option<usize> {
    let register_form = |modrm: u8| modrm >> 6 == 0b11;
    let (rex, rest) = match b.first()? {
        0x40..=0x4f => (1, b.get(1..)?),
        _ => (0, b),
    };
    let len = match rest {
        [0xf3, 0x0f, 0x1e, 0xfa, ..] if rex == 0 => 4, // endbr64
        [0x50..=0x57, ..] => 1,                        // push r
        // mov r/m,r; mov r,r/m; xor; test: register to register only.
        [0x89 | 0x8b | 0x31 | 0x33 | 0x85, m, ..] if register_form(*m) => 2,
        // add/or/and/sub/xor/cmp r, imm8 (83 /digit ib)
        [0x83, m, _, ..] if register_form(*m) => 3,
        // the same with imm32 (81 /digit id)
        [0x81, m, _, _, _, _, ..] if register_form(*m) => 6,
        _ => return None,
    };
    Some(rex + len)
}

/// `jmp [rip+0]` followed by the 8-byte target: a jump to any address that clobbers nothing.
pub fn jump_abs(target: u64) -> [u8; 14] {
    let mut code = [0u8; 14];
    code[0..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    code[6..].copy_from_slice(&target.to_le_bytes());
    code
}

/// The code page as it goes into a process whose control page is at `control` and whose
/// code page will be at `code_addr`: the hooks, and `real` set to a trampoline into the vDSO
/// `clock_gettime` at `entry` (its first bytes `entry_bytes`) where they can be relocated,
/// else to the system call. Returns the page and whether the trampoline is used.
pub fn code_page(control: u64, code_addr: u64, entry: u64, entry_bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut page = vec![0u8; TRAMPOLINE + 64];
    page[..CODE.len()].copy_from_slice(CODE);
    page[CONTROL_SLOT..CONTROL_SLOT + 8].copy_from_slice(&control.to_le_bytes());
    let real = match relocatable_prefix(entry_bytes) {
        Some(n) => {
            page[TRAMPOLINE..TRAMPOLINE + n].copy_from_slice(&entry_bytes[..n]);
            page[TRAMPOLINE + n..TRAMPOLINE + n + 14].copy_from_slice(&jump_abs(entry + n as u64));
            code_addr + TRAMPOLINE as u64
        }
        None => code_addr + RAW_CLOCK_GETTIME as u64,
    };
    page[REAL_SLOT..REAL_SLOT + 8].copy_from_slice(&real.to_le_bytes());
    (page, real == code_addr + TRAMPOLINE as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listing above is `hook.S`: re-assembled where binutils are installed.
    #[test]
    fn bytes_are_the_assembled_source() {
        let dir = tempfile::tempdir().unwrap();
        let obj = dir.path().join("hook.o");
        let bin = dir.path().join("hook.bin");
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src/hook.S");
        let assembled = std::process::Command::new("as")
            .args(["--64", "-o"])
            .arg(&obj)
            .arg(src)
            .status();
        if !matches!(assembled, Ok(s) if s.success()) {
            eprintln!("SKIP: `as` (binutils) not installed; the hook bytes are not re-assembled");
            return;
        }
        let copied = std::process::Command::new("objcopy")
            .args(["-O", "binary", "--only-section=.text"])
            .arg(&obj)
            .arg(&bin)
            .status()
            .expect("objcopy comes with as");
        assert!(copied.success());
        assert_eq!(std::fs::read(&bin).unwrap(), CODE);
    }

    #[test]
    fn entries_follow_their_labels() {
        // clock_gettime's hook saves its arguments (push rdi); gettimeofday's tests tz
        // (test rsi, rsi); time's saves t (push rdi) and calls realtime_ns; the raw reader is
        // `mov eax, 228`.
        assert_eq!(&CODE[CLOCK_GETTIME..CLOCK_GETTIME + 2], &[0x57, 0x56]);
        assert_eq!(&CODE[GETTIMEOFDAY..GETTIMEOFDAY + 3], &[0x48, 0x85, 0xf6]);
        assert_eq!(&CODE[TIME..TIME + 2], &[0x57, 0xe8]);
        assert_eq!(
            &CODE[RAW_CLOCK_GETTIME..RAW_CLOCK_GETTIME + 2],
            &[0xb8, 0xe4]
        );
        assert!(CODE.len() < TRAMPOLINE);
    }

    /// Data-driven: prologues seen in kernels' vDSOs, and ones that must be refused.
    #[test]
    fn relocates_only_known_position_independent_prologues() {
        let cases: &[(&[u8], Option<usize>)] = &[
            // push rbp; mov rbp,rsp; push r14; push rbx; and rsp,-16; sub rsp,16 (this kernel)
            (
                &[
                    0x55, 0x48, 0x89, 0xe5, 0x41, 0x56, 0x53, 0x48, 0x83, 0xe4, 0xf0, 0x48, 0x83,
                    0xec, 0x10, 0x83, 0xff, 0x17,
                ],
                Some(15),
            ),
            // endbr64; push rbp; mov rbp,rsp; push r12; push rbx; sub rsp,0x20
            (
                &[
                    0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x41, 0x54, 0x53, 0x48, 0x83,
                    0xec, 0x20,
                ],
                Some(15),
            ),
            // push rbp; lea r10,[rip+...]: RIP-relative, refused
            (
                &[
                    0x55, 0x4c, 0x8d, 0x15, 0xe8, 0x97, 0xff, 0xff, 0x48, 0x89, 0xe5, 0x90, 0x90,
                ],
                None,
            ),
            // cmp [rip+...], imm32 (a memory operand): refused
            (
                &[
                    0x81, 0x3d, 0x3a, 0x95, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x90, 0x90,
                ],
                None,
            ),
            // push rbp; mov rbp,rsp; cmp edi,0x17; ja rel32: the branch comes too early
            (
                &[
                    0x55, 0x48, 0x89, 0xe5, 0x83, 0xff, 0x17, 0x0f, 0x87, 0xd2, 0, 0, 0,
                ],
                None,
            ),
            // too short to cover the patch
            (&[0x55, 0x48, 0x89, 0xe5], None),
        ];
        for (code, want) in cases {
            assert_eq!(relocatable_prefix(code), *want, "{code:02x?}");
        }
    }

    #[test]
    fn the_page_points_real_at_the_trampoline_or_the_system_call() {
        let entry = [
            0x55, 0x48, 0x89, 0xe5, 0x41, 0x56, 0x53, 0x48, 0x83, 0xe4, 0xf0, 0x48, 0x83, 0xec,
            0x10, 0x83,
        ];
        let (page, fast) = code_page(0x1000, 0x7000_0000, 0x5000, &entry);
        assert!(fast);
        let slot = |at: usize| u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
        assert_eq!(slot(CONTROL_SLOT), 0x1000);
        assert_eq!(slot(REAL_SLOT), 0x7000_0000 + TRAMPOLINE as u64);
        assert_eq!(&page[TRAMPOLINE..TRAMPOLINE + 15], &entry[..15]);
        assert_eq!(
            &page[TRAMPOLINE + 15..TRAMPOLINE + 29],
            &jump_abs(0x5000 + 15)
        );
        let (page, fast) = code_page(0x1000, 0x7000_0000, 0x5000, &[0xcc; 16]);
        assert!(!fast);
        let real = u64::from_le_bytes(page[REAL_SLOT..REAL_SLOT + 8].try_into().unwrap());
        assert_eq!(real, 0x7000_0000 + RAW_CLOCK_GETTIME as u64);
    }
}
