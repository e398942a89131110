//! Phase 1, a compiler front end: worker threads take modules from a shared counter and
//! for each one generate source text, lex it into tokens, parse it into an s-expression
//! tree, lower that to a typed AST of `Box` nodes, resolve names with hash-map scopes
//! and a `BTreeMap` of globals, and emit string IR. Every module is dropped when done,
//! except an "exports" index of the most recent modules per worker, which keeps a
//! rotating live set (as a compiler's crate metadata does).

use crate::util::Rng;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Config {
    pub threads: usize,
    pub modules: usize,
    pub functions_per_module: usize,
}

#[derive(Default)]
pub struct Report {
    pub modules: u64,
    pub source_bytes: u64,
    pub tokens: u64,
    pub ast_nodes: u64,
    pub ir_instructions: u64,
    pub checksum: u64,
}

pub fn run(cfg: &Config) -> Report {
    let next = AtomicUsize::new(0);
    let reports: Vec<Report> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let next = &next;
                s.spawn(move || worker(t, next, cfg))
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut total = Report::default();
    for r in reports {
        total.modules += r.modules;
        total.source_bytes += r.source_bytes;
        total.tokens += r.tokens;
        total.ast_nodes += r.ast_nodes;
        total.ir_instructions += r.ir_instructions;
        total.checksum = total.checksum.wrapping_add(r.checksum);
    }
    total
}

/// Modules whose exports a worker keeps alive.
const EXPORTS_KEPT: usize = 64;

fn worker(_thread: usize, next: &AtomicUsize, cfg: &Config) -> Report {
    let mut report = Report::default();
    let mut exports: VecDeque<HashMap<String, Vec<String>>> = VecDeque::new();
    loop {
        let id = next.fetch_add(1, Ordering::Relaxed);
        if id >= cfg.modules {
            break;
        }
        let mut rng = Rng::new(id as u64);
        let source = generate(&mut rng, id, cfg.functions_per_module);
        report.source_bytes += source.len() as u64;
        let tokens = lex(&source);
        report.tokens += tokens.len() as u64;
        let sexps = parse(&tokens);
        drop(tokens);
        let funcs: Vec<Func> = sexps.iter().filter_map(lower_func).collect();
        drop(sexps);
        report.ast_nodes += funcs.iter().map(|f| f.body.count()).sum::<usize>() as u64;
        let mut globals: BTreeMap<String, usize> = BTreeMap::new();
        for f in &funcs {
            globals.insert(f.name.clone(), f.params.len());
        }
        let mut ir = Vec::new();
        let mut unresolved = 0;
        for f in &funcs {
            let mut cx = Codegen {
                globals: &globals,
                scopes: vec![f
                    .params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.clone(), i as u32))
                    .collect()],
                out: &mut ir,
                next_reg: f.params.len() as u32,
                unresolved: &mut unresolved,
            };
            cx.out
                .push(format!("fn {}({}) {{", f.name, f.params.join(", ")));
            let r = cx.expr(&f.body);
            cx.out.push(format!("  ret %{r}\n}}"));
        }
        assert_eq!(unresolved, 0, "module {id}: unresolved names");
        report.ir_instructions += ir.len() as u64;
        let mut hash = id as u64;
        for line in &ir {
            hash = hash.wrapping_mul(31).wrapping_add(line.len() as u64);
        }
        // Summed, so the total does not depend on which worker got which module.
        report.checksum = report.checksum.wrapping_add(hash);
        // Keep this module's signatures as an exports table; forget the oldest.
        let table: HashMap<String, Vec<String>> = funcs
            .iter()
            .map(|f| (f.name.clone(), f.params.clone()))
            .collect();
        exports.push_back(table);
        if exports.len() > EXPORTS_KEPT {
            exports.pop_front();
        }
        report.modules += 1;
    }
    std::hint::black_box(&exports);
    report
}

// ---------------------------------------------------------------- source generation

fn generate(rng: &mut Rng, module: usize, functions: usize) -> String {
    let mut src = String::new();
    for k in 0..functions {
        let params = rng.range(1, 5);
        let _ = write!(src, "(define (m{module}_f{k}");
        let mut vars: Vec<String> = Vec::new();
        for p in 0..params {
            let name = format!("arg{p}");
            let _ = write!(src, " {name}");
            vars.push(name);
        }
        src.push_str(")\n  ");
        let mut fresh = 0;
        gen_expr(rng, &mut src, &mut vars, &mut fresh, module, k, 0);
        src.push_str(")\n");
    }
    src
}

fn gen_expr(
    rng: &mut Rng,
    src: &mut String,
    vars: &mut Vec<String>,
    fresh: &mut u32,
    module: usize,
    func: usize,
    depth: u32,
) {
    let leaf = depth >= 7 || (depth >= 2 && rng.chance(30));
    if leaf {
        if rng.chance(60) {
            let v = &vars[rng.below(vars.len() as u64) as usize];
            src.push_str(v);
        } else {
            let _ = write!(src, "{}", rng.below(1000));
        }
        return;
    }
    match rng.below(10) {
        0..=4 => {
            let op = ["+", "-", "*", "min", "max"][rng.below(5) as usize];
            let _ = write!(src, "({op} ");
            gen_expr(rng, src, vars, fresh, module, func, depth + 1);
            src.push(' ');
            gen_expr(rng, src, vars, fresh, module, func, depth + 1);
            src.push(')');
        }
        5 | 6 => {
            let name = format!("tmp_{}_{}", depth, *fresh);
            *fresh += 1;
            let _ = write!(src, "(let {name} ");
            gen_expr(rng, src, vars, fresh, module, func, depth + 1);
            src.push(' ');
            vars.push(name);
            gen_expr(rng, src, vars, fresh, module, func, depth + 1);
            vars.pop();
            src.push(')');
        }
        7 => {
            src.push_str("(if ");
            for i in 0..3 {
                if i > 0 {
                    src.push(' ');
                }
                gen_expr(rng, src, vars, fresh, module, func, depth + 1);
            }
            src.push(')');
        }
        _ if func > 0 => {
            let callee = rng.below(func as u64);
            let _ = write!(src, "(call m{module}_f{callee}");
            for _ in 0..rng.range(1, 4) {
                src.push(' ');
                gen_expr(rng, src, vars, fresh, module, func, depth + 1);
            }
            src.push(')');
        }
        _ => {
            let _ = write!(src, "{}", rng.below(1000));
        }
    }
}

// ---------------------------------------------------------------- lexing and parsing

enum Token {
    Open,
    Close,
    Sym(String),
    Num(i64),
}

fn lex(src: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let bytes = src.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            b')' => {
                tokens.push(Token::Close);
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            _ => {
                let start = i;
                while i < bytes.len()
                    && !bytes[i].is_ascii_whitespace()
                    && bytes[i] != b'('
                    && bytes[i] != b')'
                {
                    i += 1;
                }
                let word = &src[start..i];
                tokens.push(match word.parse() {
                    Ok(n) => Token::Num(n),
                    Err(_) => Token::Sym(word.to_string()),
                });
            }
        }
    }
    tokens
}

enum Sexp {
    List(Vec<Sexp>),
    Sym(String),
    Num(i64),
}

fn parse(tokens: &[Token]) -> Vec<Sexp> {
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    for t in tokens {
        match t {
            Token::Open => stack.push(Vec::new()),
            Token::Close => {
                let list = stack.pop().expect("unbalanced");
                stack.last_mut().expect("unbalanced").push(Sexp::List(list));
            }
            Token::Sym(s) => stack.last_mut().unwrap().push(Sexp::Sym(s.clone())),
            Token::Num(n) => stack.last_mut().unwrap().push(Sexp::Num(*n)),
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced");
    stack.pop().unwrap()
}

// ---------------------------------------------------------------- AST

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Min,
    Max,
}

enum Expr {
    Num(i64),
    Var(String),
    Bin(Op, Box<Expr>, Box<Expr>),
    Let(String, Box<Expr>, Box<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

impl Expr {
    fn count(&self) -> usize {
        1 + match self {
            Expr::Num(_) | Expr::Var(_) => 0,
            Expr::Bin(_, a, b) | Expr::Let(_, a, b) => a.count() + b.count(),
            Expr::If(c, t, e) => c.count() + t.count() + e.count(),
            Expr::Call(_, args) => args.iter().map(Expr::count).sum(),
        }
    }
}

struct Func {
    name: String,
    params: Vec<String>,
    body: Box<Expr>,
}

fn lower_func(s: &Sexp) -> Option<Func> {
    let Sexp::List(items) = s else { return None };
    let [Sexp::Sym(define), Sexp::List(sig), body] = &items[..] else {
        return None;
    };
    if define != "define" {
        return None;
    }
    let mut names = sig.iter().map(|s| match s {
        Sexp::Sym(n) => Some(n.clone()),
        _ => None,
    });
    let name = names.next()??;
    let params = names.collect::<Option<Vec<_>>>()?;
    Some(Func {
        name,
        params,
        body: Box::new(lower(body)?),
    })
}

fn lower(s: &Sexp) -> Option<Expr> {
    Some(match s {
        Sexp::Num(n) => Expr::Num(*n),
        Sexp::Sym(v) => Expr::Var(v.clone()),
        Sexp::List(items) => {
            let (Sexp::Sym(head), rest) = items.split_first()? else {
                return None;
            };
            let bx = |i: usize| -> Option<Box<Expr>> { Some(Box::new(lower(rest.get(i)?)?)) };
            match head.as_str() {
                "+" | "-" | "*" | "min" | "max" => {
                    let op = match head.as_str() {
                        "+" => Op::Add,
                        "-" => Op::Sub,
                        "*" => Op::Mul,
                        "min" => Op::Min,
                        _ => Op::Max,
                    };
                    Expr::Bin(op, bx(0)?, bx(1)?)
                }
                "let" => {
                    let Sexp::Sym(name) = rest.first()? else {
                        return None;
                    };
                    Expr::Let(name.clone(), bx(1)?, bx(2)?)
                }
                "if" => Expr::If(bx(0)?, bx(1)?, bx(2)?),
                "call" => {
                    let (Sexp::Sym(callee), args) = rest.split_first()? else {
                        return None;
                    };
                    Expr::Call(
                        callee.clone(),
                        args.iter().map(lower).collect::<Option<Vec<_>>>()?,
                    )
                }
                _ => return None,
            }
        }
    })
}

// ---------------------------------------------------------------- names and IR

struct Codegen<'a> {
    globals: &'a BTreeMap<String, usize>,
    scopes: Vec<HashMap<String, u32>>,
    out: &'a mut Vec<String>,
    next_reg: u32,
    unresolved: &'a mut usize,
}

impl Codegen<'_> {
    fn reg(&mut self) -> u32 {
        self.next_reg += 1;
        self.next_reg
    }

    fn lookup(&mut self, name: &str) -> u32 {
        for scope in self.scopes.iter().rev() {
            if let Some(&r) = scope.get(name) {
                return r;
            }
        }
        *self.unresolved += 1;
        0
    }

    fn expr(&mut self, e: &Expr) -> u32 {
        match e {
            Expr::Num(n) => {
                let r = self.reg();
                self.out.push(format!("  %{r} = const {n}"));
                r
            }
            Expr::Var(v) => self.lookup(v),
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                let r = self.reg();
                let op = match op {
                    Op::Add => "add",
                    Op::Sub => "sub",
                    Op::Mul => "mul",
                    Op::Min => "min",
                    Op::Max => "max",
                };
                self.out.push(format!("  %{r} = {op} %{a}, %{b}"));
                r
            }
            Expr::Let(name, value, body) => {
                let v = self.expr(value);
                let mut scope = HashMap::new();
                scope.insert(name.clone(), v);
                self.scopes.push(scope);
                let r = self.expr(body);
                self.scopes.pop();
                r
            }
            Expr::If(c, t, e) => {
                let c = self.expr(c);
                let r = self.reg();
                self.out.push(format!("  br %{c}, L{r}t, L{r}e"));
                self.out.push(format!("L{r}t:"));
                let t = self.expr(t);
                self.out.push(format!("  %{r} = mov %{t}; jmp L{r}j"));
                self.out.push(format!("L{r}e:"));
                let e = self.expr(e);
                self.out.push(format!("  %{r} = mov %{e}\nL{r}j:"));
                r
            }
            Expr::Call(callee, args) => {
                if !self.globals.contains_key(callee) {
                    *self.unresolved += 1;
                }
                let regs: Vec<String> = args.iter().map(|a| format!("%{}", self.expr(a))).collect();
                let r = self.reg();
                self.out
                    .push(format!("  %{r} = call {callee}({})", regs.join(", ")));
                r
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_round_trips_and_resolves() {
        let mut rng = Rng::new(7);
        let src = generate(&mut rng, 7, 10);
        let sexps = parse(&lex(&src));
        let funcs: Vec<Func> = sexps.iter().filter_map(lower_func).collect();
        assert_eq!(funcs.len(), 10);
        assert!(funcs.iter().all(|f| f.body.count() >= 1));
    }

    #[test]
    fn checksum_does_not_depend_on_thread_count() {
        let cfg = |threads| Config {
            threads,
            modules: 24,
            functions_per_module: 8,
        };
        let (one, three) = (run(&cfg(1)), run(&cfg(3)));
        assert_eq!(one.modules, 24);
        assert_eq!(one.checksum, three.checksum);
        assert_eq!(one.ast_nodes, three.ast_nodes);
    }
}
