//! compiler and compiler-mt: a compiler front end, parse -> typecheck -> lower, with the
//! allocation pattern of one. Per module: generate source text; lex it, interning
//! identifiers (a per-thread `HashMap<Box<str>, u32>`: an allocation only for a new
//! name) and copying string literals into `String`s; parse into `Box`ed AST nodes with
//! argument and statement `Vec`s grown by `push`; type-check with a `Box`ed type node per
//! expression (function types cloned out of the environment at each call), a scope
//! `HashMap` per function and `format!`ted diagnostics; lower to IR (a `Vec` of blocks
//! with `String` labels, each a `Vec` of instructions with a small operand `Vec`).
//! Source, tokens, AST and type nodes die within the module; the IR is the result.
//!
//! `compiler`: one thread keeps the last 8 results and drops older ones.
//! `compiler-mt`: 4 worker threads compile modules and send the results to a collector
//! thread, which keeps the last 8 and drops the older ones: every IR block is freed by
//! a thread other than the one that allocated it.

use crate::util::{mix, scaled, Rng};
use crate::workloads::Outcome;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Modules per scale unit (about a second on one core of the reference machine).
const MODULES: usize = 1200;
/// Functions per module.
const FUNCS: usize = 24;
/// Results the single thread or the collector keeps alive.
const KEPT: usize = 8;
/// Worker threads of `compiler-mt`.
const WORKERS: usize = 4;

const WORDS: [&str; 16] = [
    "alpha", "beta", "gamma", "delta", "value", "count", "index", "total", "node", "left", "right",
    "result", "name", "buf", "len", "acc",
];

// ---- interner ----------------------------------------------------------------------------

type Sym = u32;

/// One per thread, as a compiler keeps one per session: lookups by `&str` allocate
/// nothing; a name seen for the first time is copied into a `Box<str>`.
#[derive(Default)]
struct Interner {
    ids: HashMap<Box<str>, Sym>,
    names: Vec<Box<str>>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> Sym {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as Sym;
        self.names.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }
    fn name(&self, s: Sym) -> &str {
        &self.names[s as usize]
    }
}

// ---- source generation ---------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Debug)]
enum TyName {
    Int,
    Str,
}

struct GenFunc {
    params: Vec<TyName>,
    ret: TyName,
}

fn gen_expr(
    rng: &mut Rng,
    ty: TyName,
    vars: &[(String, TyName)],
    funcs: &[GenFunc],
    depth: u32,
    out: &mut String,
) {
    // About one expression in 64 uses a variable of the wrong type: a diagnostic.
    let pick = if depth == 0 {
        rng.below(2)
    } else {
        rng.below(5)
    };
    match pick {
        0 => match ty {
            TyName::Int => {
                let _ = write!(out, "{}", rng.below(10_000));
            }
            TyName::Str => {
                let _ = write!(
                    out,
                    "\"s{}_{}\"",
                    rng.below(100),
                    WORDS[rng.below(WORDS.len())]
                );
            }
        },
        1 => {
            let wrong = rng.below(64) == 0;
            let want = if wrong { other(ty) } else { ty };
            match vars.iter().rev().find(|(_, t)| *t == want) {
                Some((name, _)) if rng.below(2) == 0 => out.push_str(name),
                _ => match vars.iter().filter(|(_, t)| *t == want).nth(rng.below(4)) {
                    Some((name, _)) => out.push_str(name),
                    None => gen_expr(rng, ty, vars, funcs, 0, out),
                },
            }
        }
        2 if !funcs.is_empty() => {
            let f = rng.below(funcs.len());
            if funcs[f].ret != ty {
                return gen_expr(rng, ty, vars, funcs, depth - 1, out);
            }
            let _ = write!(out, "f{f}(");
            for (i, &p) in funcs[f].params.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                gen_expr(rng, p, vars, funcs, depth - 1, out);
            }
            out.push(')');
        }
        _ => {
            out.push('(');
            gen_expr(rng, ty, vars, funcs, depth - 1, out);
            out.push_str(match ty {
                TyName::Int => [" + ", " - ", " * "][rng.below(3)],
                TyName::Str => " # ",
            });
            gen_expr(rng, ty, vars, funcs, depth - 1, out);
            out.push(')');
        }
    }
}

fn other(t: TyName) -> TyName {
    match t {
        TyName::Int => TyName::Str,
        TyName::Str => TyName::Int,
    }
}

fn ty_word(t: TyName) -> &'static str {
    match t {
        TyName::Int => "int",
        TyName::Str => "str",
    }
}

fn gen_block(
    rng: &mut Rng,
    vars: &mut Vec<(String, TyName)>,
    funcs: &[GenFunc],
    depth: u32,
    src: &mut String,
) {
    let scope = vars.len();
    for s in 0..rng.range(2, 6) {
        if depth > 0 && rng.below(4) == 0 {
            src.push_str("if ");
            gen_expr(rng, TyName::Int, vars, funcs, 2, src);
            src.push_str(" < ");
            gen_expr(rng, TyName::Int, vars, funcs, 1, src);
            src.push_str(" {\n");
            gen_block(rng, vars, funcs, depth - 1, src);
            src.push_str("} else {\n");
            gen_block(rng, vars, funcs, depth - 1, src);
            src.push_str("}\n");
        } else {
            let ty = if rng.below(3) == 0 {
                TyName::Str
            } else {
                TyName::Int
            };
            let name = format!("{}_{}{s}", WORDS[rng.below(WORDS.len())], depth);
            let _ = write!(src, "let {name} = ");
            gen_expr(rng, ty, vars, funcs, 3, src);
            src.push_str(";\n");
            vars.push((name, ty));
        }
    }
    vars.truncate(scope);
}

fn gen_source(rng: &mut Rng) -> String {
    let mut src = String::new();
    let mut funcs: Vec<GenFunc> = Vec::new();
    for f in 0..FUNCS {
        let params: Vec<TyName> = (0..rng.range(1, 3))
            .map(|_| {
                if rng.below(3) == 0 {
                    TyName::Str
                } else {
                    TyName::Int
                }
            })
            .collect();
        let ret = if rng.below(3) == 0 {
            TyName::Str
        } else {
            TyName::Int
        };
        let mut vars: Vec<(String, TyName)> = Vec::new();
        let _ = write!(src, "fn f{f}(");
        for (i, &p) in params.iter().enumerate() {
            let name = format!("{}{i}", WORDS[rng.below(WORDS.len())]);
            let _ = write!(
                src,
                "{}{name}: {}",
                if i > 0 { ", " } else { "" },
                ty_word(p)
            );
            vars.push((name, p));
        }
        let _ = writeln!(src, ") -> {} {{", ty_word(ret));
        gen_block(rng, &mut vars, &funcs, 2, &mut src);
        src.push_str("return ");
        gen_expr(rng, ret, &vars, &funcs, 2, &mut src);
        src.push_str(";\n}\n");
        funcs.push(GenFunc { params, ret });
    }
    src
}

// ---- lexer and parser ------------------------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(Sym),
    Num(i64),
    Str(String),
    Punct(u8),
    Arrow,
}

fn lex(src: &str, names: &mut Interner) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut toks = Vec::new();
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
            toks.push(Tok::Ident(names.intern(&src[s..i])));
        } else if c == b'"' {
            let s = i + 1;
            i = s + src[s..].find('"').unwrap();
            toks.push(Tok::Str(src[s..i].to_string()));
            i += 1;
        } else if c == b'-' && b.get(i + 1) == Some(&b'>') {
            toks.push(Tok::Arrow);
            i += 2;
        } else {
            toks.push(Tok::Punct(c));
            i += 1;
        }
    }
    toks
}

enum Expr {
    Num(i64),
    Str(String),
    Var(Sym),
    Bin(u8, Box<Expr>, Box<Expr>),
    Call(Sym, Vec<Expr>),
}

enum Stmt {
    Let(Sym, Expr),
    If(Expr, Expr, Vec<Stmt>, Vec<Stmt>),
    Return(Expr),
}

struct Func {
    name: Sym,
    params: Vec<(Sym, TyName)>,
    ret: TyName,
    body: Vec<Stmt>,
}

struct Keywords {
    func: Sym,
    let_: Sym,
    if_: Sym,
    else_: Sym,
    ret: Sym,
    int: Sym,
}

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    kw: &'a Keywords,
}

impl Parser<'_> {
    fn bump(&mut self) -> &Tok {
        self.pos += 1;
        &self.toks[self.pos - 1]
    }
    fn punct(&mut self, c: u8) {
        let t = self.bump();
        assert!(*t == Tok::Punct(c), "expected {:?}, got {t:?}", c as char);
    }
    fn ident(&mut self) -> Sym {
        match self.bump() {
            Tok::Ident(s) => *s,
            t => panic!("expected an identifier, got {t:?}"),
        }
    }
    fn ty(&mut self) -> TyName {
        if self.ident() == self.kw.int {
            TyName::Int
        } else {
            TyName::Str
        }
    }
    fn expr(&mut self) -> Expr {
        match self.bump() {
            Tok::Num(n) => Expr::Num(*n),
            Tok::Str(s) => Expr::Str(s.clone()),
            Tok::Ident(name) => {
                let name = *name;
                if self.toks[self.pos] != Tok::Punct(b'(') {
                    return Expr::Var(name);
                }
                self.pos += 1;
                let mut args = Vec::new();
                loop {
                    args.push(self.expr());
                    match self.bump() {
                        Tok::Punct(b',') => {}
                        Tok::Punct(b')') => break,
                        t => panic!("unexpected {t:?} in a call"),
                    }
                }
                Expr::Call(name, args)
            }
            Tok::Punct(b'(') => {
                let l = self.expr();
                let op = match self.bump() {
                    Tok::Punct(c) => *c,
                    t => panic!("expected an operator, got {t:?}"),
                };
                let r = self.expr();
                self.punct(b')');
                Expr::Bin(op, Box::new(l), Box::new(r))
            }
            t => panic!("unexpected {t:?}"),
        }
    }
    fn block(&mut self) -> Vec<Stmt> {
        let mut body = Vec::new();
        while self.toks[self.pos] != Tok::Punct(b'}') {
            let kw = self.ident();
            if kw == self.kw.let_ {
                let v = self.ident();
                self.punct(b'=');
                let e = self.expr();
                self.punct(b';');
                body.push(Stmt::Let(v, e));
            } else if kw == self.kw.if_ {
                let l = self.expr();
                self.punct(b'<');
                let r = self.expr();
                self.punct(b'{');
                let then = self.block();
                assert_eq!(self.ident(), self.kw.else_);
                self.punct(b'{');
                let els = self.block();
                body.push(Stmt::If(l, r, then, els));
            } else {
                assert_eq!(kw, self.kw.ret);
                let e = self.expr();
                self.punct(b';');
                body.push(Stmt::Return(e));
            }
        }
        self.pos += 1;
        body
    }
    fn func(&mut self) -> Func {
        assert_eq!(self.ident(), self.kw.func);
        let name = self.ident();
        self.punct(b'(');
        let mut params = Vec::new();
        loop {
            let p = self.ident();
            self.punct(b':');
            params.push((p, self.ty()));
            if *self.bump() == Tok::Punct(b')') {
                break;
            }
        }
        assert_eq!(*self.bump(), Tok::Arrow);
        let ret = self.ty();
        self.punct(b'{');
        let body = self.block();
        Func {
            name,
            params,
            ret,
            body,
        }
    }
}

// ---- type checker ----------------------------------------------------------------------------

/// A type node per expression, as a straightforward checker builds them.
#[derive(Clone, PartialEq)]
enum Ty {
    Int,
    Str,
    Fn(Vec<Ty>, Box<Ty>),
    Error,
}

fn ty_of(t: TyName) -> Ty {
    match t {
        TyName::Int => Ty::Int,
        TyName::Str => Ty::Str,
    }
}

fn show(t: &Ty) -> String {
    match t {
        Ty::Int => "int".to_string(),
        Ty::Str => "str".to_string(),
        Ty::Error => "{error}".to_string(),
        Ty::Fn(params, ret) => {
            let ps: Vec<String> = params.iter().map(show).collect();
            format!("fn({}) -> {}", ps.join(", "), show(ret))
        }
    }
}

struct Checker<'a> {
    globals: &'a HashMap<Sym, Ty>,
    names: &'a Interner,
    diagnostics: Vec<String>,
}

impl Checker<'_> {
    fn mismatch(&mut self, what: &str, want: &Ty, got: &Ty) {
        self.diagnostics.push(format!(
            "{what}: expected {}, found {}",
            show(want),
            show(got)
        ));
    }
    fn expr(&mut self, e: &Expr, scope: &HashMap<Sym, Ty>) -> Box<Ty> {
        Box::new(match e {
            Expr::Num(_) => Ty::Int,
            Expr::Str(_) => Ty::Str,
            Expr::Var(v) => scope.get(v).cloned().unwrap_or_else(|| {
                self.diagnostics
                    .push(format!("unknown variable {}", self.names.name(*v)));
                Ty::Error
            }),
            Expr::Bin(op, l, r) => {
                let (lt, rt) = (self.expr(l, scope), self.expr(r, scope));
                let want = if *op == b'#' { Ty::Str } else { Ty::Int };
                for t in [&lt, &rt] {
                    if **t != want && **t != Ty::Error {
                        self.mismatch(&format!("operand of '{}'", *op as char), &want, t);
                    }
                }
                want
            }
            Expr::Call(f, args) => match self.globals.get(f).cloned() {
                Some(Ty::Fn(params, ret)) => {
                    for (a, p) in args.iter().zip(&params) {
                        let at = self.expr(a, scope);
                        if *at != *p && *at != Ty::Error {
                            let what = format!("argument of {}", self.names.name(*f));
                            self.mismatch(&what, p, &at);
                        }
                    }
                    *ret
                }
                _ => {
                    self.diagnostics
                        .push(format!("unknown function {}", self.names.name(*f)));
                    Ty::Error
                }
            },
        })
    }
    fn block(&mut self, body: &[Stmt], scope: &mut HashMap<Sym, Ty>, ret: &Ty) {
        for s in body {
            match s {
                Stmt::Let(v, e) => {
                    let t = self.expr(e, scope);
                    scope.insert(*v, *t);
                }
                Stmt::If(l, r, then, els) => {
                    for e in [l, r] {
                        let t = self.expr(e, scope);
                        if *t != Ty::Int && *t != Ty::Error {
                            self.mismatch("comparison", &Ty::Int, &t);
                        }
                    }
                    // Each branch has its own scope.
                    self.block(then, &mut scope.clone(), ret);
                    self.block(els, &mut scope.clone(), ret);
                }
                Stmt::Return(e) => {
                    let t = self.expr(e, scope);
                    if *t != *ret && *t != Ty::Error {
                        self.mismatch("return value", ret, &t);
                    }
                }
            }
        }
    }
}

// ---- lowering ----------------------------------------------------------------------------------

enum Operand {
    Const(i64),
    Temp(u32),
    Var(Sym),
    Str(Box<str>),
    Func(Sym),
}

struct Inst {
    op: u8,
    dst: u32,
    args: Vec<Operand>,
}

struct Block {
    label: String,
    insts: Vec<Inst>,
}

struct IrFunc {
    name: String,
    blocks: Vec<Block>,
}

/// What a module leaves behind: IR and diagnostics.
struct Output {
    funcs: Vec<IrFunc>,
    diagnostics: Vec<String>,
}

struct Lowering {
    blocks: Vec<Block>,
    temps: u32,
}

impl Lowering {
    fn emit(&mut self, op: u8, args: Vec<Operand>) -> Operand {
        self.temps += 1;
        let dst = self.temps;
        self.blocks
            .last_mut()
            .unwrap()
            .insts
            .push(Inst { op, dst, args });
        Operand::Temp(dst)
    }
    fn new_block(&mut self, what: &str) {
        let label = format!("{what}{}", self.blocks.len());
        self.blocks.push(Block {
            label,
            insts: Vec::new(),
        });
    }
    #[allow(clippy::vec_init_then_push)] // the operand vectors grow by push on purpose
    fn expr(&mut self, e: &Expr) -> Operand {
        match e {
            Expr::Num(n) => Operand::Const(*n),
            Expr::Str(s) => Operand::Str(s.as_str().into()),
            Expr::Var(v) => Operand::Var(*v),
            Expr::Bin(op, l, r) => {
                // Grown by push (capacity 4 on the first), as IR builders do.
                let mut args = Vec::new();
                args.push(self.expr(l));
                args.push(self.expr(r));
                self.emit(*op, args)
            }
            Expr::Call(f, call_args) => {
                let mut args = vec![Operand::Func(*f)];
                for a in call_args {
                    args.push(self.expr(a));
                }
                self.emit(b'c', args)
            }
        }
    }
    fn block(&mut self, body: &[Stmt]) {
        for s in body {
            match s {
                Stmt::Let(v, e) => {
                    let value = self.expr(e);
                    self.emit(b'=', vec![Operand::Var(*v), value]);
                }
                Stmt::If(l, r, then, els) => {
                    let args = vec![self.expr(l), self.expr(r)];
                    self.emit(b'<', args);
                    self.new_block("then");
                    self.block(then);
                    self.new_block("else");
                    self.block(els);
                    self.new_block("join");
                }
                Stmt::Return(e) => {
                    let value = self.expr(e);
                    self.emit(b'r', vec![value]);
                }
            }
        }
    }
}

fn operand_hash(o: &Operand, names: &Interner) -> u64 {
    match o {
        Operand::Const(n) => *n as u64,
        Operand::Temp(t) => 1 + *t as u64,
        Operand::Var(v) | Operand::Func(v) => 2 + names.name(*v).len() as u64,
        Operand::Str(s) => 3 + s.len() as u64,
    }
}

// ---- one module --------------------------------------------------------------------------------

/// Compiles module `id` with this thread's interner; the hash depends only on `id`.
fn compile(id: usize, names: &mut Interner) -> (Output, u64) {
    let mut rng = Rng::new(7000 + id as u64);
    let src = gen_source(&mut rng);
    let kw = Keywords {
        func: names.intern("fn"),
        let_: names.intern("let"),
        if_: names.intern("if"),
        else_: names.intern("else"),
        ret: names.intern("return"),
        int: names.intern("int"),
    };
    let toks = lex(&src, names);
    drop(src);
    let mut parser = Parser {
        toks: &toks,
        pos: 0,
        kw: &kw,
    };
    let mut funcs = Vec::new();
    while parser.pos < toks.len() {
        funcs.push(parser.func());
    }
    drop(toks);

    let mut globals: HashMap<Sym, Ty> = HashMap::new();
    for f in &funcs {
        let params = f.params.iter().map(|&(_, t)| ty_of(t)).collect();
        globals.insert(f.name, Ty::Fn(params, Box::new(ty_of(f.ret))));
    }
    let mut checker = Checker {
        globals: &globals,
        names,
        diagnostics: Vec::new(),
    };
    for f in &funcs {
        let mut scope: HashMap<Sym, Ty> = f.params.iter().map(|&(p, t)| (p, ty_of(t))).collect();
        checker.block(&f.body, &mut scope, &ty_of(f.ret));
    }
    let diagnostics = checker.diagnostics;

    let mut h = mix(0, diagnostics.iter().map(|d| d.len() as u64).sum());
    let mut ir = Vec::with_capacity(funcs.len());
    for f in &funcs {
        let mut lowering = Lowering {
            blocks: Vec::new(),
            temps: 0,
        };
        lowering.new_block("entry");
        lowering.block(&f.body);
        for b in &lowering.blocks {
            h = mix(h, b.label.len() as u64);
            for inst in &b.insts {
                h = mix(h, inst.op as u64 ^ (inst.dst as u64) << 8);
                for a in &inst.args {
                    h = mix(h, operand_hash(a, names));
                }
            }
        }
        ir.push(IrFunc {
            name: names.name(f.name).to_string(),
            blocks: lowering.blocks,
        });
    }
    (
        Output {
            funcs: ir,
            diagnostics,
        },
        h,
    )
}

fn output_hash(o: &Output) -> u64 {
    o.funcs.iter().fold(o.diagnostics.len() as u64, |h, f| {
        mix(
            h,
            f.name.len() as u64 + f.blocks.iter().map(|b| b.insts.len() as u64).sum::<u64>(),
        )
    })
}

/// `compiler`: one thread; the last `KEPT` results stay alive.
pub fn run(scale: f64) -> Outcome {
    let modules = scaled(MODULES, scale, 4);
    let mut names = Interner::default();
    let mut kept: VecDeque<Output> = VecDeque::new();
    let mut h = 0u64;
    for id in 0..modules {
        let (out, mh) = compile(id, &mut names);
        h = h.wrapping_add(mix(id as u64, mh));
        kept.push_back(out);
        if kept.len() > KEPT {
            let old = kept.pop_front().unwrap();
            h = h.wrapping_add(output_hash(&old));
        }
    }
    h = h.wrapping_add(kept.iter().map(output_hash).fold(0u64, u64::wrapping_add));
    Outcome::new(h, 1)
}

/// `compiler-mt`: `WORKERS` threads compile, a collector thread keeps the last `KEPT`
/// results and frees the rest. The checksum is a sum, so it does not depend on which
/// worker compiled which module or in what order the results arrived.
pub fn run_mt(scale: f64) -> Outcome {
    let modules = scaled(MODULES, scale, 4 * WORKERS);
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<(usize, Output, u64)>(2 * WORKERS);
    let h = std::thread::scope(|s| {
        let collector = s.spawn(move || {
            let mut kept: VecDeque<Output> = VecDeque::new();
            let mut h = 0u64;
            for (id, out, mh) in rx {
                h = h.wrapping_add(mix(id as u64, mh));
                kept.push_back(out);
                if kept.len() > KEPT {
                    h = h.wrapping_add(output_hash(&kept.pop_front().unwrap()));
                }
            }
            h.wrapping_add(kept.iter().map(output_hash).fold(0u64, u64::wrapping_add))
        });
        for _ in 0..WORKERS {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || {
                let mut names = Interner::default();
                loop {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    if id >= modules {
                        break;
                    }
                    let (out, mh) = compile(id, &mut names);
                    tx.send((id, out, mh)).unwrap();
                }
            });
        }
        drop(tx);
        collector.join().unwrap()
    });
    Outcome::new(h, WORKERS)
}
