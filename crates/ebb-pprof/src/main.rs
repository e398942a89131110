//! `ebb-pprof symbolize RAW -o OUT.pb.gz` (or `ebb-pprof RAW -o OUT.pb.gz`): turn ebb's
//! raw heap profile (written where no pprof encoder was linked) into a gzipped pprof
//! profile with symbols (`go tool pprof -top OUT.pb.gz`). Run it on the machine that
//! ran the program: it reads the mapped files named in the raw profile for symbols.
//!
//! `ebb-pprof top PROFILE.pb.gz [--base BASE.pb.gz] [--index TYPE] [-n N] [--stacks]`:
//! its top allocation sites, as `pprof -top` prints them, or its top stacks
//! (`ebb_pprof::top`); `ebb top` is the same.

const USAGE: &str = "usage: ebb-pprof symbolize RAW -o OUT.pb.gz
       ebb-pprof top PROFILE.pb.gz [--base BASE.pb.gz] [--index TYPE] [-n N] [--stacks]";

/// `ebb-pprof top` is `pprof -top` without Go: the same sites as pprof (`ebb top`
/// charges Rust's collection code to its caller unless asked not to).
const SITES: ebb_pprof::top::Sites = ebb_pprof::top::Sites::OutsideAllocator;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("top") {
        std::process::exit(top(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("symbolize") {
        args.remove(0);
    }
    let (input, output) = match args.as_slice() {
        [input, flag, output] if flag == "-o" => (input, output),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    let text = std::fs::read_to_string(input).unwrap_or_else(|e| {
        eprintln!("ebb-pprof: {input}: {e}");
        std::process::exit(1)
    });
    let raw = ebb_pprof::RawProfile::parse(&text).unwrap_or_else(|e| {
        eprintln!("ebb-pprof: {input}: {e}");
        std::process::exit(1)
    });
    let profile = ebb_pprof::build(&raw);
    if let Err(e) = ebb_pprof::write_gzipped(&profile, std::path::Path::new(output)) {
        eprintln!("ebb-pprof: {output}: {e}");
        std::process::exit(1);
    }
}

/// `ebb-pprof top`: returns the exit status.
fn top(args: &[String]) -> i32 {
    let mut profile = None;
    let mut base = None;
    let mut index = None;
    let mut rows = 20;
    let mut stacks = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--base" => base = it.next(),
            "--index" => index = it.next(),
            "--stacks" => stacks = true,
            "-n" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) => rows = n,
                None => {
                    eprintln!("{USAGE}");
                    return 2;
                }
            },
            _ if profile.is_none() && !arg.starts_with('-') => profile = Some(arg),
            _ => {
                eprintln!("{USAGE}");
                return 2;
            }
        }
    }
    let Some(profile) = profile else {
        eprintln!("{USAGE}");
        return 2;
    };
    let read = |path: &String| {
        ebb_pprof::read_gzipped(std::path::Path::new(path)).map_err(|e| format!("{path}: {e}"))
    };
    let result = read(profile).and_then(|p| {
        let base = base.map(read).transpose()?;
        let index = index.map(String::as_str);
        if stacks {
            ebb_pprof::top::top_stacks(&p, base.as_ref(), index, SITES)
                .map(|t| ebb_pprof::top::format_stacks(&t, rows, 12))
        } else {
            ebb_pprof::top::top(&p, base.as_ref(), index, SITES)
                .map(|t| ebb_pprof::top::format(&t, rows))
        }
    });
    match result {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("ebb-pprof: {e}");
            1
        }
    }
}
