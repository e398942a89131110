//! tree-rebuild: the shape of an indexer or a language server (issue 20's Rust tool,
//! without its crates). Generated source files are held in memory; a pool of worker
//! threads (one per core, kept for the whole run, as rayon's) lexes and parses each into
//! an AST of boxed nodes, `Vec`s grown by `push` and boxed names, and the trees stay
//! alive. Then, round after round, a random half of the files is re-parsed and each new
//! tree replaces the old one: the old tree is dropped by whichever worker took the file,
//! usually not the one that built it, so the frees land in pages other heaps own or
//! have let go. The lexer's token vector and identifier strings die within the parse.
//!
//! Reported besides the totals: `parse_ms` (the first parse) and `rounds_ms` (each
//! re-parse round), their CPU times (`parse_cpu_ms`, `rounds_cpu_ms`: the whole
//! process's), and `last_over_first` (`_cpu`), the last round's time over the first's
//! (the target is at most 1.05: churn should not slow down as the heap ages).

use crate::util::{cores, cpu_ms, mix, scaled, Rng};
use crate::workloads::Outcome;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

/// Files per scale unit.
const FILES: usize = 1200;
/// Re-parse rounds.
const ROUNDS: usize = 8;
/// Files a worker takes at a time.
const CHUNK: usize = 4;

const NAMES: [&str; 20] = [
    "acc", "value", "count", "items", "node", "state", "buffer", "index", "key", "entry", "total",
    "left", "right", "depth", "width", "offset", "limit", "cursor", "span", "token",
];

// ---- source ----------------------------------------------------------------------------

fn gen_expr(rng: &mut Rng, depth: u32, out: &mut String) {
    match if depth == 0 {
        rng.below(2)
    } else {
        rng.below(7)
    } {
        0 => write!(out, "{}", rng.below(100_000)).unwrap(),
        1 => write!(out, "{}_{}", NAMES[rng.below(20)], rng.below(8)).unwrap(),
        2..=3 => {
            out.push('(');
            gen_expr(rng, depth - 1, out);
            out.push_str([" + ", " * ", " - ", " ^ "][rng.below(4)]);
            gen_expr(rng, depth - 1, out);
            out.push(')');
        }
        4 => {
            out.push_str("if ");
            gen_expr(rng, depth - 1, out);
            out.push_str(" { ");
            gen_expr(rng, depth - 1, out);
            out.push_str(" } else { ");
            gen_expr(rng, depth - 1, out);
            out.push_str(" }");
        }
        _ => {
            write!(out, "helper_{}(", rng.below(40)).unwrap();
            for i in 0..1 + rng.below(4) {
                if i > 0 {
                    out.push_str(", ");
                }
                gen_expr(rng, depth - 1, out);
            }
            out.push(')');
        }
    }
}

/// One source file of 6-18 KiB: structs and functions of let-statements.
fn source_file(index: usize) -> String {
    let mut rng = Rng::new(index as u64 ^ 0x7ee);
    let target = 6 * 1024 + rng.below(12 * 1024);
    let mut out = String::with_capacity(target + 1024);
    let mut item = 0;
    while out.len() < target {
        if rng.below(3) == 0 {
            write!(out, "struct S{index}x{item} {{ ").unwrap();
            for f in 0..1 + rng.below(6) {
                write!(
                    out,
                    "{}_{f}: {}, ",
                    NAMES[rng.below(20)],
                    NAMES[rng.below(20)]
                )
                .unwrap();
            }
            out.push_str("}\n");
        } else {
            write!(out, "fn f{index}x{item}(").unwrap();
            for p in 0..rng.below(4) {
                write!(out, "{}_{p}, ", NAMES[rng.below(20)]).unwrap();
            }
            out.push_str(") {\n");
            for _ in 0..2 + rng.below(6) {
                write!(out, "  let {}_{} = ", NAMES[rng.below(20)], rng.below(8)).unwrap();
                gen_expr(&mut rng, 3, &mut out);
                out.push_str(";\n");
            }
            out.push_str("  ");
            gen_expr(&mut rng, 4, &mut out);
            out.push_str("\n}\n");
        }
        item += 1;
    }
    out
}

// ---- lexer and parser ----------------------------------------------------------------------

enum Token {
    Ident(String),
    Num(u64),
    Punct(u8),
}

fn lex(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let mut n = 0u64;
            while i < b.len() && b[i].is_ascii_digit() {
                n = n * 10 + (b[i] - b'0') as u64;
                i += 1;
            }
            tokens.push(Token::Num(n));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // An owned string per identifier, as a token stream holds them.
            tokens.push(Token::Ident(src[start..i].to_string()));
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

enum Expr {
    Num(u64),
    Var(Box<str>),
    Binary(Box<Expr>, u8, Box<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(Box<str>, Vec<Expr>),
}

enum Item {
    Struct {
        name: Box<str>,
        fields: Vec<(Box<str>, Box<str>)>,
    },
    Fn {
        name: Box<str>,
        params: Vec<Box<str>>,
        body: Vec<(Box<str>, Expr)>,
        result: Expr,
    },
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
}

impl Parser<'_> {
    fn ident(&mut self) -> Box<str> {
        let Token::Ident(s) = &self.tokens[self.at] else {
            panic!("identifier expected at token {}", self.at)
        };
        self.at += 1;
        s.as_str().into()
    }
    fn punct(&mut self, c: u8) {
        assert!(matches!(self.tokens[self.at], Token::Punct(p) if p == c));
        self.at += 1;
    }
    fn peek_punct(&self, c: u8) -> bool {
        matches!(self.tokens.get(self.at), Some(Token::Punct(p)) if *p == c)
    }
    fn skip_comma(&mut self) {
        if self.peek_punct(b',') {
            self.at += 1;
        }
    }
    fn expr(&mut self) -> Expr {
        match &self.tokens[self.at] {
            Token::Num(n) => {
                self.at += 1;
                Expr::Num(*n)
            }
            Token::Punct(b'(') => {
                self.at += 1;
                let left = self.expr();
                let Token::Punct(op) = self.tokens[self.at] else {
                    panic!("operator expected")
                };
                self.at += 1;
                let right = self.expr();
                self.punct(b')');
                Expr::Binary(Box::new(left), op, Box::new(right))
            }
            Token::Ident(s) if s == "if" => {
                self.at += 1;
                let cond = self.expr();
                self.punct(b'{');
                let then = self.expr();
                self.punct(b'}');
                self.at += 1; // else
                self.punct(b'{');
                let other = self.expr();
                self.punct(b'}');
                Expr::If(Box::new(cond), Box::new(then), Box::new(other))
            }
            Token::Ident(_) => {
                let name = self.ident();
                if !self.peek_punct(b'(') {
                    return Expr::Var(name);
                }
                self.at += 1;
                let mut args = Vec::new();
                while !self.peek_punct(b')') {
                    args.push(self.expr());
                    self.skip_comma();
                }
                self.at += 1;
                Expr::Call(name, args)
            }
            Token::Punct(c) => panic!("unexpected {:?}", *c as char),
        }
    }
    fn item(&mut self) -> Item {
        let Token::Ident(kw) = &self.tokens[self.at] else {
            panic!("item expected")
        };
        let is_struct = kw == "struct";
        self.at += 1;
        let name = self.ident();
        if is_struct {
            self.punct(b'{');
            let mut fields = Vec::new();
            while !self.peek_punct(b'}') {
                let field = self.ident();
                self.punct(b':');
                fields.push((field, self.ident()));
                self.skip_comma();
            }
            self.at += 1;
            return Item::Struct { name, fields };
        }
        self.punct(b'(');
        let mut params = Vec::new();
        while !self.peek_punct(b')') {
            params.push(self.ident());
            self.skip_comma();
        }
        self.at += 1;
        self.punct(b'{');
        let mut body = Vec::new();
        while matches!(&self.tokens[self.at], Token::Ident(s) if s == "let") {
            self.at += 1;
            let var = self.ident();
            self.punct(b'=');
            body.push((var, self.expr()));
            self.punct(b';');
        }
        let result = self.expr();
        self.punct(b'}');
        Item::Fn {
            name,
            params,
            body,
            result,
        }
    }
}

/// A parsed file: its items and a digest of them (the same under every allocator).
struct Tree {
    items: Vec<Item>,
    digest: u64,
}

fn digest_expr(h: u64, e: &Expr) -> u64 {
    match e {
        Expr::Num(n) => mix(h, *n),
        Expr::Var(v) => mix(h, v.len() as u64),
        Expr::Binary(l, op, r) => digest_expr(digest_expr(mix(h, *op as u64), l), r),
        Expr::If(c, t, o) => digest_expr(digest_expr(digest_expr(mix(h, 3), c), t), o),
        Expr::Call(f, args) => args
            .iter()
            .fold(mix(h, f.len() as u64 + args.len() as u64), digest_expr),
    }
}

fn parse(src: &str) -> Tree {
    let tokens = lex(src);
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
    };
    let mut items = Vec::new();
    while parser.at < tokens.len() {
        items.push(parser.item());
    }
    let mut digest = items.len() as u64;
    for item in &items {
        digest = match item {
            Item::Struct { name, fields } => {
                mix(mix(digest, name.len() as u64), fields.len() as u64)
            }
            Item::Fn {
                name,
                params,
                body,
                result,
            } => {
                let h = mix(mix(digest, name.len() as u64), params.len() as u64);
                digest_expr(body.iter().fold(h, |h, (_, e)| digest_expr(h, e)), result)
            }
        };
    }
    Tree { items, digest }
}

// ---- the pool ------------------------------------------------------------------------------

/// What the workers share: the sources, the trees (one lock per file, never contended:
/// each index is handed to one worker per round), the files of the current round and
/// the next index to take.
struct Shared {
    sources: Vec<String>,
    trees: Vec<Mutex<Option<Tree>>>,
    round: Mutex<Vec<usize>>,
    next: AtomicUsize,
    start: Barrier,
    end: Barrier,
    stop: std::sync::atomic::AtomicBool,
}

fn worker(shared: &Shared) {
    loop {
        shared.start.wait();
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let files = shared.round.lock().unwrap().clone();
        loop {
            let first = shared.next.fetch_add(CHUNK, Ordering::Relaxed);
            if first >= files.len() {
                break;
            }
            for &file in &files[first..(first + CHUNK).min(files.len())] {
                let tree = parse(&shared.sources[file]);
                // The old tree, built by whichever worker parsed the file last, is
                // dropped here when the new one replaces it.
                *shared.trees[file].lock().unwrap() = Some(tree);
            }
        }
        drop(files);
        shared.end.wait();
    }
}

/// Run one round on the pool: every file of `files` is (re-)parsed once. Returns the
/// round's wall time and the CPU time of the whole process over it, in ms.
fn run_round(shared: &Shared, files: Vec<usize>) -> (f64, f64) {
    let cpu = cpu_ms();
    let start = Instant::now();
    *shared.round.lock().unwrap() = files;
    shared.next.store(0, Ordering::Relaxed);
    shared.start.wait();
    shared.end.wait();
    (start.elapsed().as_secs_f64() * 1e3, cpu_ms() - cpu)
}

pub fn run(scale: f64) -> Outcome {
    let files = scaled(FILES, scale, 8);
    let threads = cores();
    let shared = Arc::new(Shared {
        sources: (0..files).map(source_file).collect(),
        trees: (0..files).map(|_| Mutex::new(None)).collect(),
        round: Mutex::new(Vec::new()),
        next: AtomicUsize::new(0),
        start: Barrier::new(threads + 1),
        end: Barrier::new(threads + 1),
        stop: std::sync::atomic::AtomicBool::new(false),
    });
    let pool: Vec<_> = (0..threads)
        .map(|_| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || worker(&shared))
        })
        .collect();

    let (parse_ms, parse_cpu_ms) = run_round(&shared, (0..files).collect());
    let mut rng = Rng::new(20);
    let mut rounds_ms = Vec::with_capacity(ROUNDS);
    let mut rounds_cpu_ms = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        // A random half, in file order (a Fisher-Yates shuffle, first half taken).
        let mut order: Vec<usize> = (0..files).collect();
        for i in (1..files).rev() {
            order.swap(i, rng.below(i + 1));
        }
        order.truncate(files / 2);
        order.sort_unstable();
        let (wall, cpu) = run_round(&shared, order);
        rounds_ms.push(wall);
        rounds_cpu_ms.push(cpu);
    }
    shared.stop.store(true, Ordering::Release);
    shared.start.wait();
    for t in pool {
        t.join().unwrap();
    }

    let mut h = 0u64;
    for tree in &shared.trees {
        let tree = tree.lock().unwrap();
        let tree = tree.as_ref().expect("every file parsed");
        h = mix(mix(h, tree.digest), tree.items.len() as u64);
    }
    let list = |v: &[f64]| {
        let parts: Vec<String> = v.iter().map(|ms| format!("{ms:.1}")).collect();
        format!("[{}]", parts.join(","))
    };
    let mut out = Outcome::new(h, threads);
    out.extra
        .push(("parse_ms".to_string(), format!("{parse_ms:.1}")));
    out.extra
        .push(("parse_cpu_ms".to_string(), format!("{parse_cpu_ms:.1}")));
    out.extra.push(("rounds_ms".to_string(), list(&rounds_ms)));
    out.extra
        .push(("rounds_cpu_ms".to_string(), list(&rounds_cpu_ms)));
    out.extra.push((
        "last_over_first".to_string(),
        format!("{:.3}", rounds_ms[ROUNDS - 1] / rounds_ms[0]),
    ));
    out.extra.push((
        "last_over_first_cpu".to_string(),
        format!("{:.3}", rounds_cpu_ms[ROUNDS - 1] / rounds_cpu_ms[0]),
    ));
    out
}
