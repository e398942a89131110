//! frontend: mixed sizes with realistic lifetimes, like a compiler front end or a logic
//! minimiser (espresso). Per module: generate source text, lex it into tokens with
//! `String` identifiers, parse it into `Box` expression trees, resolve names with a
//! `HashMap` per function and a global `BTreeMap`, fold constants (rebuilding trees),
//! emit `String` IR; the last few modules stay alive, older ones are dropped. Between
//! modules, a Quine-McCluskey pass merges cubes (`Vec<u8>`) deduplicated in a `HashSet`.

use crate::util::{mix, scaled, Rng};
use crate::workloads::Outcome;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(i64),
    Sym(char),
}

#[derive(Debug, Clone)]
enum Expr {
    Num(i64),
    Var(String),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

struct Func {
    name: String,
    params: Vec<String>,
    body: Vec<(String, Box<Expr>)>,
}

const WORDS: [&str; 12] = [
    "alpha", "beta", "gamma", "delta", "value", "count", "index", "total", "node", "left", "right",
    "result",
];

fn gen_expr(rng: &mut Rng, vars: &[String], funcs: usize, depth: u32, out: &mut String) {
    match if depth == 0 {
        rng.below(2)
    } else {
        rng.below(5)
    } {
        0 => {
            let _ = write!(out, "{}", rng.below(1000));
        }
        1 => out.push_str(&vars[rng.below(vars.len())]),
        2 if funcs > 0 => {
            let _ = write!(out, "f{}(", rng.below(funcs));
            let n = rng.range(1, 3);
            for i in 0..n {
                if i > 0 {
                    out.push_str(", ");
                }
                gen_expr(rng, vars, funcs, depth - 1, out);
            }
            out.push(')');
        }
        _ => {
            out.push('(');
            gen_expr(rng, vars, funcs, depth - 1, out);
            out.push_str([" + ", " - ", " * "][rng.below(3)]);
            gen_expr(rng, vars, funcs, depth - 1, out);
            out.push(')');
        }
    }
}

fn gen_source(rng: &mut Rng, funcs: usize) -> String {
    let mut src = String::new();
    for f in 0..funcs {
        let mut vars: Vec<String> = (0..rng.range(1, 3))
            .map(|i| format!("{}_{i}", WORDS[rng.below(WORDS.len())]))
            .collect();
        let _ = writeln!(src, "fn f{f}({}) {{", vars.join(", "));
        for s in 0..rng.range(3, 12) {
            let name = format!("{}{s}", WORDS[rng.below(WORDS.len())]);
            let _ = write!(src, "  let {name} = ");
            gen_expr(rng, &vars, f, 4, &mut src);
            src.push_str(";\n");
            vars.push(name);
        }
        src.push_str("}\n");
    }
    src
}

fn lex(src: &str) -> Vec<Tok> {
    let mut toks = Vec::new();
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            toks.push(Tok::Num(src[s..i].parse().unwrap()));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok::Ident(src[s..i].to_string()));
        } else {
            toks.push(Tok::Sym(c as char));
            i += 1;
        }
    }
    toks
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn next(&mut self) -> Tok {
        self.pos += 1;
        self.toks[self.pos - 1].clone()
    }
    fn peek(&self) -> &Tok {
        &self.toks[self.pos]
    }
    fn expect(&mut self, c: char) {
        let t = self.next();
        assert_eq!(t, Tok::Sym(c));
    }
    fn ident(&mut self) -> String {
        match self.next() {
            Tok::Ident(s) => s,
            t => panic!("expected identifier, got {t:?}"),
        }
    }
    fn expr(&mut self) -> Box<Expr> {
        match self.next() {
            Tok::Num(n) => Box::new(Expr::Num(n)),
            Tok::Ident(name) => {
                if *self.peek() == Tok::Sym('(') {
                    self.pos += 1;
                    let mut args = Vec::new();
                    loop {
                        args.push(*self.expr());
                        match self.next() {
                            Tok::Sym(',') => {}
                            Tok::Sym(')') => break,
                            t => panic!("unexpected {t:?}"),
                        }
                    }
                    Box::new(Expr::Call(name, args))
                } else {
                    Box::new(Expr::Var(name))
                }
            }
            Tok::Sym('(') => {
                let l = self.expr();
                let op = match self.next() {
                    Tok::Sym(c) => c,
                    t => panic!("unexpected {t:?}"),
                };
                let r = self.expr();
                self.expect(')');
                Box::new(Expr::Bin(op, l, r))
            }
            t => panic!("unexpected {t:?}"),
        }
    }
    fn func(&mut self) -> Func {
        assert_eq!(self.ident(), "fn");
        let name = self.ident();
        self.expect('(');
        let mut params = Vec::new();
        loop {
            params.push(self.ident());
            if let Tok::Sym(')') = self.next() {
                break;
            }
        }
        self.expect('{');
        let mut body = Vec::new();
        while *self.peek() != Tok::Sym('}') {
            assert_eq!(self.ident(), "let");
            let v = self.ident();
            self.expect('=');
            let e = self.expr();
            self.expect(';');
            body.push((v, e));
        }
        self.pos += 1;
        Func { name, params, body }
    }
}

/// Resolve names: every variable must be a parameter or an earlier `let`.
fn resolve(f: &Func, uses: &mut BTreeMap<String, Vec<u32>>) -> u64 {
    let mut scope: HashMap<String, usize> = HashMap::new();
    for (i, p) in f.params.iter().enumerate() {
        scope.insert(p.clone(), i);
    }
    fn walk(
        e: &Expr,
        scope: &HashMap<String, usize>,
        uses: &mut BTreeMap<String, Vec<u32>>,
    ) -> u64 {
        match e {
            Expr::Num(n) => *n as u64,
            Expr::Var(v) => *scope.get(v).expect("unresolved variable") as u64,
            Expr::Bin(_, l, r) => walk(l, scope, uses) ^ walk(r, scope, uses).rotate_left(3),
            Expr::Call(name, args) => {
                uses.entry(name.clone())
                    .or_default()
                    .push(args.len() as u32);
                args.iter().fold(7, |h, a| mix(h, walk(a, scope, uses)))
            }
        }
    }
    let mut h = 0;
    for (v, e) in &f.body {
        h = mix(h, walk(e, &scope, uses));
        let n = scope.len();
        scope.insert(v.clone(), n);
    }
    h
}

/// Constant folding: returns a new tree.
fn fold(e: &Expr) -> Box<Expr> {
    Box::new(match e {
        Expr::Bin(op, l, r) => {
            let (l, r) = (fold(l), fold(r));
            match (&*l, &*r) {
                (Expr::Num(a), Expr::Num(b)) => Expr::Num(match op {
                    '+' => a.wrapping_add(*b),
                    '-' => a.wrapping_sub(*b),
                    _ => a.wrapping_mul(*b) % 1_000_003,
                }),
                _ => Expr::Bin(*op, l, r),
            }
        }
        Expr::Call(n, args) => Expr::Call(n.clone(), args.iter().map(|a| *fold(a)).collect()),
        other => other.clone(),
    })
}

fn emit(e: &Expr, out: &mut Vec<String>, tmp: &mut usize) -> String {
    match e {
        Expr::Num(n) => n.to_string(),
        Expr::Var(v) => v.clone(),
        Expr::Bin(op, l, r) => {
            let (a, b) = (emit(l, out, tmp), emit(r, out, tmp));
            *tmp += 1;
            out.push(format!("  %t{} = {} {a}, {b}", *tmp, op));
            format!("%t{}", *tmp)
        }
        Expr::Call(n, args) => {
            let a: Vec<String> = args.iter().map(|x| emit(x, out, tmp)).collect();
            *tmp += 1;
            out.push(format!("  %t{} = call {n}({})", *tmp, a.join(", ")));
            format!("%t{}", *tmp)
        }
    }
}

struct Module {
    funcs: Vec<Func>,
    ir: Vec<String>,
}

fn compile(rng: &mut Rng, uses: &mut BTreeMap<String, Vec<u32>>) -> (Module, u64) {
    let src = gen_source(rng, 40);
    let toks = lex(&src);
    let mut p = Parser { toks, pos: 0 };
    let mut funcs = Vec::new();
    while p.pos < p.toks.len() {
        funcs.push(p.func());
    }
    let mut h = 0;
    let mut ir = Vec::new();
    for f in &mut funcs {
        h = mix(h, resolve(f, uses));
        ir.push(format!("define {}({}) {{", f.name, f.params.join(", ")));
        let mut tmp = 0;
        for (v, e) in &mut f.body {
            *e = fold(e);
            let r = emit(e, &mut ir, &mut tmp);
            ir.push(format!("  {v} = {r}"));
        }
        ir.push("}".to_string());
    }
    for line in &ir {
        h = mix(h, line.len() as u64);
    }
    (Module { funcs, ir }, h)
}

/// One Quine-McCluskey merge sweep over random minterms of `vars` variables: cubes are
/// `Vec<u8>` (0, 1, or 2 for "don't care"), merged while two differ in one position.
fn minimise(rng: &mut Rng, vars: usize, minterms: usize) -> u64 {
    let mut cubes: Vec<Vec<u8>> = {
        let mut seen = HashSet::new();
        (0..minterms)
            .map(|_| rng.below(1 << vars))
            .filter(|m| seen.insert(*m))
            .map(|m| (0..vars).map(|b| (m >> b & 1) as u8).collect())
            .collect()
    };
    let mut primes: Vec<Vec<u8>> = Vec::new();
    while !cubes.is_empty() {
        let mut merged: HashSet<Vec<u8>> = HashSet::new();
        let mut used = vec![false; cubes.len()];
        // Group by number of ones to only compare neighbours.
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, c) in cubes.iter().enumerate() {
            groups
                .entry(c.iter().filter(|&&x| x == 1).count())
                .or_default()
                .push(i);
        }
        for (&ones, ga) in &groups {
            let Some(gb) = groups.get(&(ones + 1)) else {
                continue;
            };
            for &a in ga {
                for &b in gb {
                    let (ca, cb) = (&cubes[a], &cubes[b]);
                    let mut diff = None;
                    let mut n = 0;
                    for k in 0..vars {
                        if ca[k] != cb[k] {
                            n += 1;
                            diff = Some(k);
                        }
                    }
                    if n == 1 {
                        let mut c = ca.clone();
                        c[diff.unwrap()] = 2;
                        merged.insert(c);
                        used[a] = true;
                        used[b] = true;
                    }
                }
            }
        }
        for (c, u) in cubes.into_iter().zip(used) {
            if !u {
                primes.push(c);
            }
        }
        let mut next: Vec<Vec<u8>> = merged.into_iter().collect();
        next.sort();
        cubes = next;
    }
    primes.sort();
    primes.iter().fold(primes.len() as u64, |h, c| {
        mix(h, c.iter().fold(0u64, |a, &x| a * 3 + x as u64))
    })
}

pub fn run(scale: f64) -> Outcome {
    let modules = scaled(500, scale, 3);
    let mut rng = Rng::new(2);
    let mut live: VecDeque<Module> = VecDeque::new();
    let mut uses: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut h = 0;
    for m in 0..modules {
        let (module, mh) = compile(&mut rng, &mut uses);
        h = mix(h, mh);
        live.push_back(module);
        if live.len() > 8 {
            let old = live.pop_front().unwrap();
            h = mix(h, old.funcs.len() as u64 + old.ir.len() as u64);
        }
        if m % 4 == 0 {
            h = mix(h, minimise(&mut rng, 10, 300));
        }
        if uses.len() > 64 {
            uses.clear();
        }
    }
    for (k, v) in &uses {
        h = mix(h, k.len() as u64 + v.len() as u64);
    }
    Outcome::new(h, 1)
}
