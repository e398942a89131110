//! The executable mappings of the process, from `/proc/self/maps` read through a stack
//! buffer: for the stack capture (is this word a code address?) and for the profile's
//! mapping records (which file, at which offset, so the encoder can symbolize).

use crate::os;

fn hex(field: &[u8]) -> Option<usize> {
    if field.is_empty() {
        return None;
    }
    let mut v = 0usize;
    for &b in field {
        v = v.checked_mul(16)? + (b as char).to_digit(16)? as usize;
    }
    Some(v)
}

/// `start-end perms offset dev inode [path]` of an executable mapping:
/// `(start, end, offset, path)` (the path may be empty).
fn parse(line: &[u8]) -> Option<(usize, usize, usize, &[u8])> {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    let perms = fields.next()?;
    if perms.get(2) != Some(&b'x') {
        return None;
    }
    let offset = hex(fields.next()?)?;
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
    let Some(fd) = os::open_read(b"/proc/self/maps\0") else {
        return false;
    };
    let mut buf = [0u8; 4096];
    let mut len = 0;
    let mut eof = false;
    while !eof || len > 0 {
        if !eof && len < buf.len() {
            let n = os::read_fd(fd, &mut buf[len..]);
            if n <= 0 {
                eof = true;
            } else {
                len += n as usize;
            }
        }
        let mut consumed = 0;
        loop {
            let rest = &buf[consumed..len];
            let line_len = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => i,
                None if eof || (consumed == 0 && len == buf.len()) => rest.len(),
                None => break,
            };
            if line_len == 0 && rest.is_empty() {
                break;
            }
            if let Some((start, end, offset, path)) = parse(&rest[..line_len]) {
                f(start, end, offset, path);
            }
            consumed += (line_len + 1).min(rest.len());
        }
        buf.copy_within(consumed..len, 0);
        len -= consumed;
    }
    os::close_fd(fd);
    true
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
