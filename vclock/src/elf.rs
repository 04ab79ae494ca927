//! Finding the clock functions in a vDSO image: its dynamic symbol table.
//!
//! The vDSO is a small (two pages here) ELF64 shared object whose whole file image is mapped,
//! section headers included, so the `.dynsym` section and its string table are read straight
//! from the mapping. Written by hand: it is one table in one fixed layout, and a general ELF
//! crate would be the heaviest dependency of this crate for forty lines.

/// Where a symbol's code is, relative to the mapping's start, and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol {
    pub offset: u64,
    pub size: u64,
}

const EM_X86_64: u16 = 62;
const ELFCLASS64: u8 = 2;
const PT_LOAD: u32 = 1;
const SHT_DYNSYM: u32 = 11;
const SYM_BYTES: usize = 24;
/// A vDSO has a dozen symbols; the bound keeps a corrupt table from running on.
const MAX_SYMBOLS: usize = 4096;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Checks the image is an x86_64 ELF64 object; the reason otherwise.
pub fn check_x86_64(image: &[u8]) -> Result<(), String> {
    if image.get(0..4) != Some(b"\x7fELF") {
        return Err("no ELF header".into());
    }
    if image.get(4) != Some(&ELFCLASS64) {
        return Err("not a 64-bit ELF image (a 32-bit process?)".into());
    }
    match u16_at(image, 0x12) {
        Some(EM_X86_64) => Ok(()),
        Some(m) => Err(format!("ELF machine {m}, not x86_64 ({EM_X86_64})")),
        None => Err("truncated ELF header".into()),
    }
}

/// Looks `name` up in the image's dynamic symbols; `Ok(None)` if it is not there.
pub fn find_symbol(image: &[u8], name: &str) -> Result<Option<Symbol>, String> {
    let bad = |what: &str| format!("bad vDSO image: {what}");
    // The load bias: symbol values are virtual addresses; the first PT_LOAD maps file offset 0.
    let phoff = u64_at(image, 0x20).ok_or_else(|| bad("e_phoff"))? as usize;
    let phentsize = u16_at(image, 0x36).ok_or_else(|| bad("e_phentsize"))? as usize;
    let phnum = u16_at(image, 0x38).ok_or_else(|| bad("e_phnum"))? as usize;
    let mut vaddr0 = None;
    for i in 0..phnum.min(64) {
        let at = phoff + i * phentsize;
        if u32_at(image, at) == Some(PT_LOAD) {
            let offset = u64_at(image, at + 8).ok_or_else(|| bad("p_offset"))?;
            let vaddr = u64_at(image, at + 16).ok_or_else(|| bad("p_vaddr"))?;
            vaddr0 = Some(vaddr - offset);
            break;
        }
    }
    let vaddr0 = vaddr0.ok_or_else(|| bad("no PT_LOAD"))?;
    let shoff = u64_at(image, 0x28).ok_or_else(|| bad("e_shoff"))? as usize;
    let shentsize = u16_at(image, 0x3a).ok_or_else(|| bad("e_shentsize"))? as usize;
    let shnum = u16_at(image, 0x3c).ok_or_else(|| bad("e_shnum"))? as usize;
    let section = |i: usize| -> Option<(u32, usize, usize, usize)> {
        let at = shoff + i * shentsize;
        let kind = u32_at(image, at + 4)?;
        let offset = u64_at(image, at + 24)? as usize;
        let size = u64_at(image, at + 32)? as usize;
        let link = u32_at(image, at + 40)? as usize;
        Some((kind, offset, size, link))
    };
    for i in 0..shnum.min(256) {
        let Some((kind, offset, size, link)) = section(i) else {
            return Err(bad("section header past the image"));
        };
        if kind != SHT_DYNSYM {
            continue;
        }
        let (_, str_offset, str_size, _) =
            section(link).ok_or_else(|| bad("string table header"))?;
        let strings = image
            .get(str_offset..str_offset + str_size)
            .ok_or_else(|| bad("string table past the image"))?;
        for s in 0..(size / SYM_BYTES).min(MAX_SYMBOLS) {
            let at = offset + s * SYM_BYTES;
            let name_at = u32_at(image, at).ok_or_else(|| bad("symbol past the image"))? as usize;
            let value = u64_at(image, at + 8).ok_or_else(|| bad("symbol value"))?;
            let sym_size = u64_at(image, at + 16).ok_or_else(|| bad("symbol size"))?;
            let Some(rest) = strings.get(name_at..) else {
                continue;
            };
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            if &rest[..end] == name.as_bytes() && value != 0 {
                return Ok(Some(Symbol {
                    offset: value - vaddr0,
                    size: sym_size,
                }));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own vDSO, read from its mapping.
    fn own_vdso() -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps.lines().find(|l| l.ends_with("[vdso]")).unwrap();
        let (start, end) = crate::process::parse_range(line).unwrap();
        // Safety: the kernel maps the vDSO readable for the life of the process.
        unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) }.to_vec()
    }

    #[test]
    fn finds_the_clock_functions_of_this_process() {
        let image = own_vdso();
        check_x86_64(&image).unwrap();
        for name in ["__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time"] {
            let sym = find_symbol(&image, name).unwrap().unwrap();
            assert!(sym.size >= 12, "{name}: {sym:?}");
            assert!((sym.offset as usize) < image.len(), "{name}: {sym:?}");
        }
        assert_eq!(find_symbol(&image, "__vdso_no_such").unwrap(), None);
    }

    #[test]
    fn refuses_what_is_not_an_x86_64_elf64() {
        assert!(check_x86_64(b"not elf").is_err());
        let mut image = own_vdso();
        image[4] = 1;
        assert!(check_x86_64(&image).unwrap_err().contains("32-bit"));
        let mut image = own_vdso();
        image[0x12] = 183; // aarch64
        assert!(check_x86_64(&image).unwrap_err().contains("183"));
        // A truncated image is an error, never a panic.
        assert!(find_symbol(&own_vdso()[..0x30], "__vdso_time").is_err());
    }
}
