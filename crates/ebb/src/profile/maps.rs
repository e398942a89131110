//! The executable mappings of the process, from `/proc/self/maps` read through a stack
//! buffer: for the stack capture (is this word a code address?) and for the profile's
//! mapping records (which file, at which offset, so the encoder can symbolize).

/// `start-end perms offset dev inode [path]` of an executable mapping:
/// `(start, end, offset, path)` (the path may be empty).
fn parse(line: &[u8]) -> Option<(usize, usize, usize, &[u8])> {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = crate::diag::parse_hex(&range[..dash])?;
    let end = crate::diag::parse_hex(&range[dash + 1..])?;
    let perms = fields.next()?;
    if perms.get(2) != Some(&b'x') {
        return None;
    }
    let offset = crate::diag::parse_hex(fields.next()?)?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = match fields.next() {
        Some(name) => &line[name.as_ptr() as usize - line.as_ptr() as usize..],
        None => &[],
    };
    Some((start, end, offset, path))
}

/// Call `f(start, end, file offset, path)` for every executable mapping, in address
/// order. False if `/proc/self/maps` cannot be read.
pub fn for_each_executable(mut f: impl FnMut(usize, usize, usize, &[u8])) -> bool {
    crate::diag::for_each_line(b"/proc/self/maps\0", |line| {
        if let Some((start, end, offset, path)) = parse(line) {
            f(start, end, offset, path);
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_this_code() {
        let here = finds_this_code as *const () as usize;
        let mut hit = false;
        assert!(super::for_each_executable(|s, e, _, path| {
            hit |= s <= here && here < e && !path.is_empty();
        }));
        assert!(hit);
    }
}
