//! Smoke test: every workload runs once at a tiny scale under this build's allocator
//! (ebb by default), exits successfully and prints one valid JSON line with the
//! expected fields. Not timed.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ebb-bench-speed");
const WORKLOADS: [&str; 13] = [
    "churn",
    "frontend",
    "larson",
    "prodcons",
    "mstress",
    "cache-scratch",
    "sweep",
    "growth",
    "typechecker",
    "compiler",
    "compiler-mt",
    "huge-replace",
    "tree-rebuild",
];

/// A minimal JSON validator: returns the top-level keys and their raw values.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out = String::new();
        loop {
            match self.s.get(self.i) {
                None => return Err("unterminated string".into()),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.push(*self.s.get(self.i + 1).ok_or("bad escape")? as char);
                    self.i += 2;
                }
                Some(&c) => {
                    out.push(c as char);
                    self.i += 1;
                }
            }
        }
    }
    fn value(&mut self) -> Result<(), String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => self.object().map(|_| ()),
            Some(b'"') => self.string().map(|_| ()),
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.value()?;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(format!("bad array at byte {}", self.i)),
                    }
                }
            }
            _ => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || b"+-.".contains(&self.s[self.i]))
                {
                    self.i += 1;
                }
                let tok = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                if tok == "true" || tok == "false" || tok == "null" || tok.parse::<f64>().is_ok() {
                    Ok(())
                } else {
                    Err(format!("bad value {tok:?} at byte {start}"))
                }
            }
        }
    }
    fn object(&mut self) -> Result<Vec<(String, String)>, String> {
        self.eat(b'{')?;
        let mut fields = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(fields);
        }
        loop {
            let k = self.string()?;
            self.eat(b':')?;
            self.ws();
            let start = self.i;
            self.value()?;
            let raw = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
            fields.push((k, raw));
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(fields);
                }
                _ => return Err(format!("bad object at byte {}", self.i)),
            }
        }
    }
}

fn parse(line: &str) -> Result<Vec<(String, String)>, String> {
    let mut p = Parser {
        s: line.as_bytes(),
        i: 0,
    };
    let fields = p.object()?;
    p.ws();
    if p.i != line.len() {
        return Err(format!("trailing data at byte {}", p.i));
    }
    Ok(fields)
}

#[test]
fn list_names_every_workload() {
    let out = Command::new(BIN).arg("--list").output().unwrap();
    assert!(out.status.success());
    let names: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(names, WORKLOADS);
}

#[test]
fn every_workload_runs_at_a_tiny_scale() {
    for w in WORKLOADS {
        let out = Command::new(BIN)
            .args([w, "--scale", "0.01"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{w} failed: {}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{w}: expected one line, got {stdout:?}");
        let fields =
            parse(lines[0]).unwrap_or_else(|e| panic!("{w}: invalid JSON ({e}): {}", lines[0]));
        let get = |k: &str| {
            fields
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("{w}: no field {k:?} in {}", lines[0]))
        };
        assert_eq!(get("workload"), format!("\"{w}\""));
        assert_eq!(get("allocator"), "\"ebb\"", "the test build uses ebb");
        assert!(get("wall_ms").parse::<f64>().unwrap() >= 0.0);
        assert!(get("cpu_ms").parse::<f64>().unwrap() >= 0.0);
        assert!(get("peak_rss_kib").parse::<u64>().unwrap() > 0);
        assert_eq!(get("checksum").len(), 18, "{w}: checksum is 16 hex digits");
        if w == "sweep" {
            assert!(get("sizes").contains("\"33554432\""), "{w}: per-size times");
        }
    }
}

#[test]
fn bad_arguments_are_rejected() {
    for args in [
        &["no-such-workload"][..],
        &[],
        &["churn", "--scale", "-1"],
        &["churn", "--bogus"],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
