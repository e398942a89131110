//! `ebb-pprof RAW -o OUT.pb.gz`: symbolize ebb's raw heap samples into a gzipped pprof
//! profile (`go tool pprof -top OUT.pb.gz`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (input, output) = match args.as_slice() {
        [input, flag, output] if flag == "-o" => (input, output),
        _ => {
            eprintln!("usage: ebb-pprof RAW -o OUT.pb.gz");
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
