//! `/proc/self/maps` and `/proc/self/smaps`, read line by line through a stack buffer
//! (no allocation: the retention report runs in `atexit` handlers of programs whose
//! heap is ebb).

/// Bytes of a mapping's name kept (longer names are cut).
pub const NAME_MAX: usize = 80;

/// One mapping (a kernel VMA).
#[derive(Clone, Copy)]
pub struct Mapping {
    pub start: usize,
    pub end: usize,
    /// `rwxp`/`rwxs` as the kernel prints them.
    pub perms: [u8; 4],
    pub inode: u64,
    name: [u8; NAME_MAX],
    name_len: u8,
    /// Resident bytes (`Rss:`; smaps only, 0 from maps).
    pub rss: u64,
}

impl Mapping {
    const EMPTY: Mapping = Mapping {
        start: 0,
        end: 0,
        perms: [0; 4],
        inode: 0,
        name: [0; NAME_MAX],
        name_len: 0,
        rss: 0,
    };

    /// The path or `[name]` the kernel shows (may be empty).
    pub fn name(&self) -> &str {
        core::str::from_utf8(&self.name[..self.name_len as usize]).unwrap_or("?")
    }

    /// Private or shared memory backed by no file: unnamed, `[heap]` or `[anon:...]`.
    pub fn is_anonymous(&self) -> bool {
        let name = self.name();
        self.inode == 0 && (name.is_empty() || name == "[heap]" || name.starts_with("[anon"))
    }

    /// The main thread's stack (`[stack]`, or `[stack:tid]` on old kernels).
    pub fn is_stack(&self) -> bool {
        self.name().starts_with("[stack")
    }

    /// Backed by a file (a path, shared memory, `memfd:`).
    pub fn is_file(&self) -> bool {
        self.inode != 0 || self.name().starts_with('/')
    }

    /// No access (a guard page or a reservation).
    pub fn is_inaccessible(&self) -> bool {
        &self.perms[..3] == b"---"
    }
}

/// Call `f` for every mapping of the process, in address order: from
/// `/proc/self/smaps` with `rss` filled if `with_rss`, else from `/proc/self/maps`.
/// False if the file cannot be read.
pub fn for_each_mapping(with_rss: bool, mut f: impl FnMut(&Mapping)) -> bool {
    let path: &[u8] = if with_rss {
        b"/proc/self/smaps\0"
    } else {
        b"/proc/self/maps\0"
    };
    let mut current = Mapping::EMPTY;
    let mut have = false;
    let read = crate::diag::for_each_line(path, |line| {
        if let Some(m) = parse_header(line) {
            if have {
                f(&current);
            }
            current = m;
            have = true;
        } else if let Some(kb) = field_kb(line, b"Rss:") {
            current.rss = kb * 1024;
        }
    });
    if have {
        f(&current);
    }
    read
}

fn decimal(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)? + (b - b'0') as u64;
    }
    Some(v)
}

/// A mapping's first line: `start-end perms offset dev inode [name]`.
fn parse_header(line: &[u8]) -> Option<Mapping> {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = crate::diag::parse_hex(&range[..dash])?;
    let end = crate::diag::parse_hex(&range[dash + 1..])?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    let _offset = crate::diag::parse_hex(fields.next()?)?;
    let _dev = fields.next()?;
    let inode = decimal(fields.next()?)?;
    let mut m = Mapping::EMPTY;
    m.start = start;
    m.end = end;
    m.perms.copy_from_slice(perms);
    m.inode = inode;
    // The name is the rest of the line after the inode (it may hold spaces).
    if let Some(name) = fields.next() {
        let at = name.as_ptr() as usize - line.as_ptr() as usize;
        let name = &line[at..];
        let n = name.len().min(NAME_MAX);
        m.name[..n].copy_from_slice(&name[..n]);
        m.name_len = n as u8;
    }
    Some(m)
}

/// The value of `Key:   123 kB`.
fn field_kb(line: &[u8], key: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(key)?;
    let mut fields = rest.split(|&b| b == b' ').filter(|f| !f.is_empty());
    decimal(fields.next()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse() {
        let m = parse_header(b"7f12a000-7f12c000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((m.start, m.end, m.inode), (0x7f12a000, 0x7f12c000, 0));
        assert!(m.is_anonymous() && !m.is_file());
        let m = parse_header(b"55d0-55e0 r-xp 00001000 08:01 1234   /usr/bin/my prog").unwrap();
        assert_eq!(m.name(), "/usr/bin/my prog");
        assert!(m.is_file() && !m.is_anonymous());
        assert!(parse_header(b"Rss:   12 kB").is_none());
        assert_eq!(field_kb(b"Rss:          1234 kB", b"Rss:"), Some(1234));
    }

    #[test]
    fn own_smaps_adds_up_to_status() {
        let mut rss = 0;
        let mut count: u64 = 0;
        let mut stack = false;
        assert!(for_each_mapping(true, |m| {
            rss += m.rss;
            count += 1;
            stack |= m.is_stack();
        }));
        assert!(count > 5 && rss > 0 && stack, "{count} mappings, rss {rss}");
        let mut maps: u64 = 0;
        assert!(for_each_mapping(false, |_| maps += 1));
        // Other test threads may map or unmap in between.
        assert!(maps.abs_diff(count) < 50, "{maps} vs {count}");
    }
}
