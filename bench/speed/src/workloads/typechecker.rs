//! typechecker: a thread pool (std threads and channels) type-checking modules. A job
//! builds type trees (`Box`ed enums with `String` names and `BTreeMap` fields), an
//! environment `HashMap`, unifies pairs of types with a substitution map, and renders
//! types to `String`s. Results go back to the main thread, which drops them there, and
//! each module's exported interface is passed to a job of the next wave, on whichever
//! worker picks it up, and dropped there: a share of all frees are cross-thread.

use crate::util::{cores, mix, scaled, Rng};
use crate::workloads::Outcome;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::{mpsc, Arc, Mutex};

#[derive(Clone, Debug, PartialEq)]
enum Ty {
    Int,
    Str,
    Var(u32),
    Ref(Box<Ty>),
    Fn(Vec<Ty>, Box<Ty>),
    Struct(String, BTreeMap<String, Ty>),
}

const FIELDS: [&str; 8] = [
    "id", "name", "next", "value", "items", "parent", "len", "data",
];

fn gen_ty(rng: &mut Rng, depth: u32, vars: &mut u32) -> Ty {
    match if depth == 0 {
        rng.below(3)
    } else {
        rng.below(7)
    } {
        0 => Ty::Int,
        1 => Ty::Str,
        2 => {
            *vars += 1;
            Ty::Var(*vars)
        }
        3 => Ty::Ref(Box::new(gen_ty(rng, depth - 1, vars))),
        4 | 5 => {
            let n = rng.range(0, 3);
            let args = (0..n).map(|_| gen_ty(rng, depth - 1, vars)).collect();
            Ty::Fn(args, Box::new(gen_ty(rng, depth - 1, vars)))
        }
        _ => {
            let n = rng.range(1, 4);
            let fields = (0..n)
                .map(|_| {
                    (
                        FIELDS[rng.below(FIELDS.len())].to_string(),
                        gen_ty(rng, depth - 1, vars),
                    )
                })
                .collect();
            Ty::Struct(format!("S{}", rng.below(50)), fields)
        }
    }
}

fn resolve(t: &Ty, subst: &HashMap<u32, Ty>) -> Ty {
    match t {
        Ty::Var(v) => match subst.get(v) {
            Some(u) => resolve(u, subst),
            None => t.clone(),
        },
        Ty::Ref(b) => Ty::Ref(Box::new(resolve(b, subst))),
        Ty::Fn(a, r) => Ty::Fn(
            a.iter().map(|x| resolve(x, subst)).collect(),
            Box::new(resolve(r, subst)),
        ),
        Ty::Struct(n, f) => Ty::Struct(
            n.clone(),
            f.iter()
                .map(|(k, v)| (k.clone(), resolve(v, subst)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn occurs(v: u32, t: &Ty) -> bool {
    match t {
        Ty::Var(w) => *w == v,
        Ty::Ref(b) => occurs(v, b),
        Ty::Fn(a, r) => a.iter().any(|x| occurs(v, x)) || occurs(v, r),
        Ty::Struct(_, f) => f.values().any(|x| occurs(v, x)),
        _ => false,
    }
}

fn unify(a: &Ty, b: &Ty, subst: &mut HashMap<u32, Ty>) -> Result<(), String> {
    let (a, b) = (resolve(a, subst), resolve(b, subst));
    match (&a, &b) {
        (Ty::Var(x), Ty::Var(y)) if x == y => Ok(()),
        (Ty::Var(x), t) | (t, Ty::Var(x)) => {
            if occurs(*x, t) {
                return Err(format!("infinite type: ?{x} in {}", show(t)));
            }
            subst.insert(*x, t.clone());
            Ok(())
        }
        (Ty::Int, Ty::Int) | (Ty::Str, Ty::Str) => Ok(()),
        (Ty::Ref(x), Ty::Ref(y)) => unify(x, y, subst),
        (Ty::Fn(xa, xr), Ty::Fn(ya, yr)) if xa.len() == ya.len() => {
            for (x, y) in xa.iter().zip(ya) {
                unify(x, y, subst)?;
            }
            unify(xr, yr, subst)
        }
        (Ty::Struct(xn, xf), Ty::Struct(yn, yf)) if xn == yn => {
            for (k, x) in xf {
                if let Some(y) = yf.get(k) {
                    unify(x, y, subst)?;
                }
            }
            Ok(())
        }
        _ => Err(format!("mismatch: {} vs {}", show(&a), show(&b))),
    }
}

fn show(t: &Ty) -> String {
    let mut s = String::new();
    fn go(t: &Ty, s: &mut String) {
        match t {
            Ty::Int => s.push_str("int"),
            Ty::Str => s.push_str("str"),
            Ty::Var(v) => {
                let _ = write!(s, "?{v}");
            }
            Ty::Ref(b) => {
                s.push('&');
                go(b, s);
            }
            Ty::Fn(a, r) => {
                s.push_str("fn(");
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    go(x, s);
                }
                s.push_str(") -> ");
                go(r, s);
            }
            Ty::Struct(n, f) => {
                s.push_str(n);
                s.push_str(" { ");
                for (k, v) in f {
                    s.push_str(k);
                    s.push_str(": ");
                    go(v, s);
                    s.push_str(", ");
                }
                s.push('}');
            }
        }
    }
    go(t, &mut s);
    s
}

type Interface = BTreeMap<String, Ty>;

struct Job {
    id: usize,
    imports: Vec<Interface>,
}

struct Done {
    id: usize,
    diagnostics: Vec<String>,
    interface: Interface,
    hash: u64,
}

fn check_module(job: Job) -> Done {
    let mut rng = Rng::new(1000 + job.id as u64);
    let mut vars = 0u32;
    let mut env: HashMap<String, Ty> = HashMap::new();
    for i in 0..150 {
        env.insert(
            format!("def_{}_{i}", job.id),
            gen_ty(&mut rng, 4, &mut vars),
        );
    }
    let mut h = 0u64;
    for interface in &job.imports {
        for (k, v) in interface {
            env.insert(k.clone(), v.clone());
        }
        h = mix(h, interface.len() as u64);
    }
    drop(job.imports); // frees memory allocated by another worker
    let mut names: Vec<&String> = env.keys().collect();
    names.sort();
    let mut diagnostics = Vec::new();
    for _ in 0..300 {
        let a = &env[names[rng.below(names.len())]];
        let b = &env[names[rng.below(names.len())]];
        let mut subst = HashMap::new();
        match unify(a, b, &mut subst) {
            Ok(()) => {
                let t = resolve(a, &subst);
                let s = show(&t);
                h = mix(h, s.len() as u64);
                diagnostics.push(s);
            }
            Err(e) => {
                h = mix(h, e.len() as u64 + 1);
                diagnostics.push(e);
            }
        }
    }
    let interface: Interface = names
        .iter()
        .take(40)
        .map(|n| ((*n).clone(), env[*n].clone()))
        .collect();
    Done {
        id: job.id,
        diagnostics,
        interface,
        hash: h,
    }
}

pub fn run(scale: f64) -> Outcome {
    let workers = cores();
    let waves = scaled(60, scale, 2);
    let wave_size = 8 * workers;
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let pool: Vec<_> = (0..workers)
        .map(|_| {
            let rx = Arc::clone(&job_rx);
            let tx = done_tx.clone();
            std::thread::spawn(move || loop {
                let job = rx.lock().unwrap().recv();
                match job {
                    Ok(job) => tx.send(check_module(job)).unwrap(),
                    Err(_) => break,
                }
            })
        })
        .collect();
    drop(done_tx);
    let mut h = 0u64;
    let mut interfaces: Vec<Option<Interface>> = (0..wave_size).map(|_| None).collect();
    for wave in 0..waves {
        for k in 0..wave_size {
            let mut imports = Vec::new();
            imports.extend(interfaces[k].take());
            imports.extend(interfaces[(k + 1) % wave_size].clone());
            job_tx
                .send(Job {
                    id: wave * wave_size + k,
                    imports,
                })
                .unwrap();
        }
        let mut results: Vec<Done> = (0..wave_size).map(|_| done_rx.recv().unwrap()).collect();
        results.sort_by_key(|d| d.id);
        for (k, d) in results.into_iter().enumerate() {
            h = mix(h, d.hash);
            h = mix(h, d.diagnostics.iter().map(|s| s.len() as u64).sum());
            interfaces[k] = Some(d.interface);
            // d.diagnostics dropped here: allocated by a worker, freed by main.
        }
    }
    drop(job_tx);
    for j in pool {
        j.join().unwrap();
    }
    Outcome::new(h, workers)
}
