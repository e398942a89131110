//! `ebb-pprof symbolize RAW -o OUT.pb.gz` (or `ebb-pprof RAW -o OUT.pb.gz`): turn ebb's
//! raw heap profile (written where no pprof encoder was linked) into a gzipped pprof
//! profile with symbols (`go tool pprof -top OUT.pb.gz`). Run it on the machine that
//! ran the program: it reads the mapped files named in the raw profile for symbols.

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("symbolize") {
        args.remove(0);
    }
    let (input, output) = match args.as_slice() {
        [input, flag, output] if flag == "-o" => (input, output),
        _ => {
            eprintln!("usage: ebb-pprof symbolize RAW -o OUT.pb.gz");
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
