/* compiler: a compiler front end in C (the Rust workload `compiler`, same generated
 * modules): per module, generate source text into a buffer grown by realloc; lex it,
 * interning identifiers in a hash table (a malloc'd copy only for a new name) and
 * copying string literals; parse into malloc'd AST nodes with argument and statement
 * arrays grown by realloc; type-check with a malloc'd type node per expression
 * (function types deep-copied out of the globals at each call), a scope array per
 * block and malloc'd diagnostics; lower to IR: blocks with malloc'd labels, arrays of
 * instructions with small operand arrays, all grown by realloc. Source, tokens, AST and
 * types die within the module; the last 8 modules' IR stay alive.
 * usage: compiler [scale] */
#include "common.h"
#include <stdarg.h>

enum { FUNCS = 24, KEPT = 8, MODULES = 1200 };
static const char *WORDS[16] = {"alpha", "beta", "gamma", "delta", "value", "count", "index", "total",
                                "node",  "left", "right", "result", "name", "buf",   "len",   "acc"};

/* ---- growable arrays and strings ---- */

#define PUSH(arr, n, cap, item)                                                     \
    do {                                                                            \
        if ((n) == (cap)) {                                                         \
            (cap) = (cap) ? 2 * (cap) : 4;                                          \
            (arr) = realloc((arr), (cap) * sizeof *(arr));                          \
            if (!(arr)) abort();                                                    \
        }                                                                           \
        (arr)[(n)++] = (item);                                                      \
    } while (0)

typedef struct { char *p; size_t len, cap; } sb_t;

static void sb_printf(sb_t *s, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? s->cap - s->len : 0, fmt, ap);
        va_end(ap);
        if (s->p && s->len + (size_t)n < s->cap) {
            s->len += (size_t)n;
            return;
        }
        s->cap = s->cap ? 2 * s->cap : 64;
        while (s->cap < s->len + (size_t)n + 1) s->cap *= 2;
        s->p = realloc(s->p, s->cap);
        if (!s->p) abort();
    }
}

static char *xprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

/* ---- interner: one per run, as a compiler keeps one per session ---- */

typedef struct { char **names; uint32_t n, cap; uint32_t *slots; uint32_t nslots; } interner_t;

static uint64_t hash_str(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint32_t intern(interner_t *t, const char *s, size_t len) {
    if (2 * (t->n + 1) > t->nslots) {
        uint32_t nslots = t->nslots ? 2 * t->nslots : 256;
        uint32_t *slots = calloc(nslots, sizeof *slots);
        if (!slots) abort();
        for (uint32_t i = 0; i < t->n; i++) {
            uint64_t j = hash_str(t->names[i], strlen(t->names[i])) & (nslots - 1);
            while (slots[j]) j = (j + 1) & (nslots - 1);
            slots[j] = i + 1;
        }
        free(t->slots);
        t->slots = slots;
        t->nslots = nslots;
    }
    uint64_t j = hash_str(s, len) & (t->nslots - 1);
    while (t->slots[j]) {
        const char *name = t->names[t->slots[j] - 1];
        if (strncmp(name, s, len) == 0 && name[len] == 0) return t->slots[j] - 1;
        j = (j + 1) & (t->nslots - 1);
    }
    char *copy = xmalloc(len + 1);
    memcpy(copy, s, len);
    copy[len] = 0;
    PUSH(t->names, t->n, t->cap, copy);
    t->slots[j] = t->n;
    return t->n - 1;
}

/* ---- source generation (the Rust workload's generator, same choices) ---- */

enum { INT, STR };
typedef struct { char *name; int ty; } var_t;
typedef struct { var_t *v; size_t n, cap; } vars_t;
typedef struct { int params[3]; int nparams, ret; } gfunc_t;

static void gen_expr(rng_t *r, int ty, const vars_t *vars, const gfunc_t *funcs, size_t nfuncs, int depth,
                     sb_t *out) {
    size_t pick = depth == 0 ? rng_below(r, 2) : rng_below(r, 5);
    if (pick == 0) {
        if (ty == INT) sb_printf(out, "%zu", rng_below(r, 10000));
        else {
            size_t a = rng_below(r, 100);
            sb_printf(out, "\"s%zu_%s\"", a, WORDS[rng_below(r, 16)]);
        }
    } else if (pick == 1) {
        int want = rng_below(r, 64) == 0 ? !ty : ty;
        const var_t *last = NULL;
        for (size_t i = vars->n; i-- > 0;)
            if (vars->v[i].ty == want) { last = &vars->v[i]; break; }
        if (last && rng_below(r, 2) == 0) {
            sb_printf(out, "%s", last->name);
            return;
        }
        size_t k = rng_below(r, 4), seen = 0;
        for (size_t i = 0; i < vars->n; i++)
            if (vars->v[i].ty == want && seen++ == k) {
                sb_printf(out, "%s", vars->v[i].name);
                return;
            }
        gen_expr(r, ty, vars, funcs, nfuncs, 0, out);
    } else if (pick == 2 && nfuncs > 0) {
        size_t f = rng_below(r, nfuncs);
        if (funcs[f].ret != ty) {
            gen_expr(r, ty, vars, funcs, nfuncs, depth - 1, out);
            return;
        }
        sb_printf(out, "f%zu(", f);
        for (int i = 0; i < funcs[f].nparams; i++) {
            if (i > 0) sb_printf(out, ", ");
            gen_expr(r, funcs[f].params[i], vars, funcs, nfuncs, depth - 1, out);
        }
        sb_printf(out, ")");
    } else {
        sb_printf(out, "(");
        gen_expr(r, ty, vars, funcs, nfuncs, depth - 1, out);
        static const char *ops[3] = {" + ", " - ", " * "};
        sb_printf(out, "%s", ty == INT ? ops[rng_below(r, 3)] : " # ");
        gen_expr(r, ty, vars, funcs, nfuncs, depth - 1, out);
        sb_printf(out, ")");
    }
}

static void gen_block(rng_t *r, vars_t *vars, const gfunc_t *funcs, size_t nfuncs, int depth, sb_t *src) {
    size_t scope = vars->n, n = rng_range(r, 2, 6);
    for (size_t s = 0; s < n; s++) {
        if (depth > 0 && rng_below(r, 4) == 0) {
            sb_printf(src, "if ");
            gen_expr(r, INT, vars, funcs, nfuncs, 2, src);
            sb_printf(src, " < ");
            gen_expr(r, INT, vars, funcs, nfuncs, 1, src);
            sb_printf(src, " {\n");
            gen_block(r, vars, funcs, nfuncs, depth - 1, src);
            sb_printf(src, "} else {\n");
            gen_block(r, vars, funcs, nfuncs, depth - 1, src);
            sb_printf(src, "}\n");
        } else {
            int ty = rng_below(r, 3) == 0 ? STR : INT;
            const char *w = WORDS[rng_below(r, 16)];
            var_t v = {xprintf("%s_%d%zu", w, depth, s), ty};
            sb_printf(src, "let %s = ", v.name);
            gen_expr(r, ty, vars, funcs, nfuncs, 3, src);
            sb_printf(src, ";\n");
            PUSH(vars->v, vars->n, vars->cap, v);
        }
    }
    while (vars->n > scope) free(vars->v[--vars->n].name);
}

static char *gen_source(rng_t *r) {
    sb_t src = {0};
    gfunc_t funcs[FUNCS];
    for (size_t f = 0; f < FUNCS; f++) {
        gfunc_t g;
        g.nparams = (int)rng_range(r, 1, 3);
        for (int i = 0; i < g.nparams; i++) g.params[i] = rng_below(r, 3) == 0 ? STR : INT;
        g.ret = rng_below(r, 3) == 0 ? STR : INT;
        vars_t vars = {0};
        sb_printf(&src, "fn f%zu(", f);
        for (int i = 0; i < g.nparams; i++) {
            var_t v = {xprintf("%s%d", WORDS[rng_below(r, 16)], i), g.params[i]};
            sb_printf(&src, "%s%s: %s", i ? ", " : "", v.name, g.params[i] == INT ? "int" : "str");
            PUSH(vars.v, vars.n, vars.cap, v);
        }
        sb_printf(&src, ") -> %s {\n", g.ret == INT ? "int" : "str");
        gen_block(r, &vars, funcs, f, 2, &src);
        sb_printf(&src, "return ");
        gen_expr(r, g.ret, &vars, funcs, f, 2, &src);
        sb_printf(&src, ";\n}\n");
        for (size_t i = 0; i < vars.n; i++) free(vars.v[i].name);
        free(vars.v);
        funcs[f] = g;
    }
    return src.p;
}

/* ---- lexer ---- */

enum { T_IDENT, T_NUM, T_STR, T_PUNCT, T_ARROW };
typedef struct { int kind; uint32_t sym; int64_t num; char *str; } tok_t;
typedef struct { tok_t *t; size_t n, cap; } toks_t;

static toks_t lex(const char *s, interner_t *names) {
    toks_t toks = {0};
    for (size_t i = 0; s[i];) {
        char c = s[i];
        tok_t t = {0};
        if (c == ' ' || c == '\n') { i++; continue; }
        if (c >= '0' && c <= '9') {
            t.kind = T_NUM;
            while (s[i] >= '0' && s[i] <= '9') t.num = t.num * 10 + (s[i++] - '0');
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t st = i;
            while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                   s[i] == '_')
                i++;
            t.kind = T_IDENT;
            t.sym = intern(names, s + st, i - st);
        } else if (c == '"') {
            size_t st = ++i;
            while (s[i] != '"') i++;
            t.kind = T_STR;
            t.str = xmalloc(i - st + 1);
            memcpy(t.str, s + st, i - st);
            t.str[i - st] = 0;
            i++;
        } else if (c == '-' && s[i + 1] == '>') {
            t.kind = T_ARROW;
            i += 2;
        } else {
            t.kind = T_PUNCT;
            t.num = c;
            i++;
        }
        PUSH(toks.t, toks.n, toks.cap, t);
    }
    return toks;
}

/* ---- AST and parser ---- */

enum { E_NUM, E_STR, E_VAR, E_BIN, E_CALL };
typedef struct expr {
    int kind, op;
    int64_t num;
    uint32_t sym;
    char *str;
    struct expr *l, *r, **args;
    size_t nargs, cap;
} expr_t;

enum { S_LET, S_IF, S_RETURN };
struct stmt;
typedef struct { struct stmt **s; size_t n, cap; } body_t;
typedef struct stmt { int kind; uint32_t sym; expr_t *a, *b; body_t then, els; } stmt_t;
typedef struct { uint32_t name; uint32_t psym[3]; int pty[3]; int nparams, ret; body_t body; } func_t;
typedef struct { uint32_t fn, let, if_, else_, ret, int_; } kw_t;
typedef struct { const tok_t *t; size_t pos; const kw_t *kw; } parser_t;

static int is_punct(const tok_t *t, char c) { return t->kind == T_PUNCT && t->num == c; }
static void expect(parser_t *p, char c) {
    if (!is_punct(&p->t[p->pos++], c)) { fprintf(stderr, "parse error: expected %c\n", c); abort(); }
}
static uint32_t ident(parser_t *p) {
    if (p->t[p->pos].kind != T_IDENT) { fprintf(stderr, "parse error: expected identifier\n"); abort(); }
    return p->t[p->pos++].sym;
}

static expr_t *parse_expr(parser_t *p) {
    const tok_t *t = &p->t[p->pos++];
    expr_t *e = calloc(1, sizeof *e);
    if (!e) abort();
    if (t->kind == T_NUM) { e->kind = E_NUM; e->num = t->num; }
    else if (t->kind == T_STR) { e->kind = E_STR; e->str = xprintf("%s", t->str); }
    else if (t->kind == T_IDENT) {
        e->sym = t->sym;
        e->kind = E_VAR;
        if (is_punct(&p->t[p->pos], '(')) {
            e->kind = E_CALL;
            p->pos++;
            for (;;) {
                expr_t *a = parse_expr(p);
                PUSH(e->args, e->nargs, e->cap, a);
                if (is_punct(&p->t[p->pos++], ')')) break;
            }
        }
    } else {
        e->kind = E_BIN;
        e->l = parse_expr(p);
        e->op = (int)p->t[p->pos++].num;
        e->r = parse_expr(p);
        expect(p, ')');
    }
    return e;
}

static body_t parse_block(parser_t *p) {
    body_t body = {0};
    while (!is_punct(&p->t[p->pos], '}')) {
        uint32_t kw = ident(p);
        stmt_t *s = calloc(1, sizeof *s);
        if (!s) abort();
        if (kw == p->kw->let) {
            s->kind = S_LET;
            s->sym = ident(p);
            expect(p, '=');
            s->a = parse_expr(p);
            expect(p, ';');
        } else if (kw == p->kw->if_) {
            s->kind = S_IF;
            s->a = parse_expr(p);
            expect(p, '<');
            s->b = parse_expr(p);
            expect(p, '{');
            s->then = parse_block(p);
            ident(p); /* else */
            expect(p, '{');
            s->els = parse_block(p);
        } else {
            s->kind = S_RETURN;
            s->a = parse_expr(p);
            expect(p, ';');
        }
        PUSH(body.s, body.n, body.cap, s);
    }
    p->pos++;
    return body;
}

static void free_expr(expr_t *e) {
    if (!e) return;
    free(e->str);
    free_expr(e->l);
    free_expr(e->r);
    for (size_t i = 0; i < e->nargs; i++) free_expr(e->args[i]);
    free(e->args);
    free(e);
}

static void free_body(body_t *b) {
    for (size_t i = 0; i < b->n; i++) {
        stmt_t *s = b->s[i];
        free_expr(s->a);
        free_expr(s->b);
        free_body(&s->then);
        free_body(&s->els);
        free(s);
    }
    free(b->s);
}

/* ---- type checker: a malloc'd type node per expression ---- */

enum { TY_INT, TY_STR, TY_FN, TY_ERROR };
typedef struct ty { int kind; struct ty **params; int nparams; struct ty *ret; } ty_t;

static ty_t *ty_new(int kind) {
    ty_t *t = calloc(1, sizeof *t);
    if (!t) abort();
    t->kind = kind;
    return t;
}
static ty_t *ty_clone(const ty_t *t) {
    ty_t *c = ty_new(t->kind);
    if (t->kind == TY_FN) {
        c->nparams = t->nparams;
        c->params = xmalloc(sizeof(ty_t *) * (size_t)t->nparams);
        for (int i = 0; i < t->nparams; i++) c->params[i] = ty_clone(t->params[i]);
        c->ret = ty_clone(t->ret);
    }
    return c;
}
static void ty_free(ty_t *t) {
    if (!t) return;
    for (int i = 0; i < t->nparams; i++) ty_free(t->params[i]);
    free(t->params);
    ty_free(t->ret);
    free(t);
}
static const char *ty_name(const ty_t *t) {
    return t->kind == TY_INT ? "int" : t->kind == TY_STR ? "str" : t->kind == TY_FN ? "fn" : "{error}";
}

typedef struct { uint32_t sym; ty_t *ty; } binding_t;
typedef struct { binding_t *b; size_t n, cap; } scope_t;
typedef struct { ty_t **fn_types; size_t nfuncs; uint32_t *fn_syms; interner_t *names; char **diag; size_t ndiag, cap; } checker_t;

static void diag(checker_t *c, char *msg) { PUSH(c->diag, c->ndiag, c->cap, msg); }

static ty_t *check_expr(checker_t *c, const expr_t *e, const scope_t *scope) {
    switch (e->kind) {
    case E_NUM: return ty_new(TY_INT);
    case E_STR: return ty_new(TY_STR);
    case E_VAR:
        for (size_t i = scope->n; i-- > 0;)
            if (scope->b[i].sym == e->sym) return ty_clone(scope->b[i].ty);
        diag(c, xprintf("unknown variable %s", c->names->names[e->sym]));
        return ty_new(TY_ERROR);
    case E_BIN: {
        ty_t *l = check_expr(c, e->l, scope), *r = check_expr(c, e->r, scope);
        int want = e->op == '#' ? TY_STR : TY_INT;
        ty_t *ts[2] = {l, r};
        for (int i = 0; i < 2; i++)
            if (ts[i]->kind != want && ts[i]->kind != TY_ERROR)
                diag(c, xprintf("operand of '%c': expected %s, found %s", e->op, want == TY_INT ? "int" : "str",
                                ty_name(ts[i])));
        ty_free(l);
        ty_free(r);
        return ty_new(want);
    }
    default: {
        for (size_t f = 0; f < c->nfuncs; f++)
            if (c->fn_syms[f] == e->sym) {
                ty_t *fn = ty_clone(c->fn_types[f]);
                for (size_t i = 0; i < e->nargs && i < (size_t)fn->nparams; i++) {
                    ty_t *a = check_expr(c, e->args[i], scope);
                    if (a->kind != fn->params[i]->kind && a->kind != TY_ERROR)
                        diag(c, xprintf("argument of %s: expected %s, found %s", c->names->names[e->sym],
                                        ty_name(fn->params[i]), ty_name(a)));
                    ty_free(a);
                }
                ty_t *ret = fn->ret;
                fn->ret = NULL;
                ty_free(fn);
                return ret;
            }
        diag(c, xprintf("unknown function %s", c->names->names[e->sym]));
        return ty_new(TY_ERROR);
    }
    }
}

static void check_block(checker_t *c, const body_t *body, scope_t *scope, int ret) {
    size_t mark = scope->n;
    for (size_t i = 0; i < body->n; i++) {
        const stmt_t *s = body->s[i];
        if (s->kind == S_LET) {
            binding_t b = {s->sym, check_expr(c, s->a, scope)};
            PUSH(scope->b, scope->n, scope->cap, b);
        } else if (s->kind == S_IF) {
            const expr_t *es[2] = {s->a, s->b};
            for (int k = 0; k < 2; k++) {
                ty_t *t = check_expr(c, es[k], scope);
                if (t->kind != TY_INT && t->kind != TY_ERROR)
                    diag(c, xprintf("comparison: expected int, found %s", ty_name(t)));
                ty_free(t);
            }
            /* Each branch has its own scope: a copy, as the Rust checker clones its map. */
            for (int k = 0; k < 2; k++) {
                scope_t inner = {0};
                for (size_t j = 0; j < scope->n; j++) {
                    binding_t b = {scope->b[j].sym, ty_clone(scope->b[j].ty)};
                    PUSH(inner.b, inner.n, inner.cap, b);
                }
                check_block(c, k ? &s->els : &s->then, &inner, ret);
                for (size_t j = 0; j < inner.n; j++) ty_free(inner.b[j].ty);
                free(inner.b);
            }
        } else {
            ty_t *t = check_expr(c, s->a, scope);
            if (t->kind != ret && t->kind != TY_ERROR)
                diag(c, xprintf("return value: expected %s, found %s", ret == TY_INT ? "int" : "str", ty_name(t)));
            ty_free(t);
        }
    }
    while (scope->n > mark) ty_free(scope->b[--scope->n].ty);
}

/* ---- lowering ---- */

enum { O_CONST, O_TEMP, O_VAR, O_STR, O_FUNC };
typedef struct { int kind; int64_t v; char *str; } operand_t;
typedef struct { int op; uint32_t dst; operand_t *args; size_t nargs, cap; } inst_t;
typedef struct { char *label; inst_t *insts; size_t n, cap; } block_t;
typedef struct { char *name; block_t *blocks; size_t n, cap; } irfunc_t;
typedef struct { irfunc_t *funcs; size_t nfuncs; char **diag; size_t ndiag; } output_t;
typedef struct { block_t *blocks; size_t n, cap; uint32_t temps; } lowering_t;

static operand_t emit(lowering_t *lw, int op, inst_t inst) {
    inst.op = op;
    inst.dst = ++lw->temps;
    block_t *b = &lw->blocks[lw->n - 1];
    PUSH(b->insts, b->n, b->cap, inst);
    return (operand_t){O_TEMP, inst.dst, NULL};
}
static void new_block(lowering_t *lw, const char *what) {
    block_t b = {xprintf("%s%zu", what, lw->n), NULL, 0, 0};
    PUSH(lw->blocks, lw->n, lw->cap, b);
}
static operand_t lower_expr(lowering_t *lw, const expr_t *e) {
    inst_t inst = {0};
    switch (e->kind) {
    case E_NUM: return (operand_t){O_CONST, e->num, NULL};
    case E_STR: return (operand_t){O_STR, 0, xprintf("%s", e->str)};
    case E_VAR: return (operand_t){O_VAR, e->sym, NULL};
    case E_BIN: {
        operand_t l = lower_expr(lw, e->l), r = lower_expr(lw, e->r);
        PUSH(inst.args, inst.nargs, inst.cap, l);
        PUSH(inst.args, inst.nargs, inst.cap, r);
        return emit(lw, e->op, inst);
    }
    default: {
        operand_t f = {O_FUNC, e->sym, NULL};
        PUSH(inst.args, inst.nargs, inst.cap, f);
        for (size_t i = 0; i < e->nargs; i++) {
            operand_t a = lower_expr(lw, e->args[i]);
            PUSH(inst.args, inst.nargs, inst.cap, a);
        }
        return emit(lw, 'c', inst);
    }
    }
}
static void lower_block(lowering_t *lw, const body_t *body) {
    for (size_t i = 0; i < body->n; i++) {
        const stmt_t *s = body->s[i];
        inst_t inst = {0};
        if (s->kind == S_LET) {
            operand_t v = {O_VAR, s->sym, NULL}, value = lower_expr(lw, s->a);
            PUSH(inst.args, inst.nargs, inst.cap, v);
            PUSH(inst.args, inst.nargs, inst.cap, value);
            emit(lw, '=', inst);
        } else if (s->kind == S_IF) {
            operand_t l = lower_expr(lw, s->a), r = lower_expr(lw, s->b);
            PUSH(inst.args, inst.nargs, inst.cap, l);
            PUSH(inst.args, inst.nargs, inst.cap, r);
            emit(lw, '<', inst);
            new_block(lw, "then");
            lower_block(lw, &s->then);
            new_block(lw, "else");
            lower_block(lw, &s->els);
            new_block(lw, "join");
        } else {
            operand_t value = lower_expr(lw, s->a);
            PUSH(inst.args, inst.nargs, inst.cap, value);
            emit(lw, 'r', inst);
        }
    }
}

static void free_output(output_t *o) {
    for (size_t f = 0; f < o->nfuncs; f++) {
        irfunc_t *fn = &o->funcs[f];
        for (size_t b = 0; b < fn->n; b++) {
            block_t *bl = &fn->blocks[b];
            for (size_t i = 0; i < bl->n; i++) {
                for (size_t a = 0; a < bl->insts[i].nargs; a++) free(bl->insts[i].args[a].str);
                free(bl->insts[i].args);
            }
            free(bl->insts);
            free(bl->label);
        }
        free(fn->blocks);
        free(fn->name);
    }
    free(o->funcs);
    for (size_t i = 0; i < o->ndiag; i++) free(o->diag[i]);
    free(o->diag);
    free(o);
}

/* ---- one module ---- */

static output_t *compile(size_t id, interner_t *names, uint64_t *hash) {
    rng_t r;
    rng_seed(&r, 7000 + id);
    char *src = gen_source(&r);
    kw_t kw = {intern(names, "fn", 2),     intern(names, "let", 3),    intern(names, "if", 2),
               intern(names, "else", 4),   intern(names, "return", 6), intern(names, "int", 3)};
    toks_t toks = lex(src, names);
    free(src);
    parser_t p = {toks.t, 0, &kw};
    func_t *funcs = NULL;
    size_t nfuncs = 0, cap = 0;
    while (p.pos < toks.n) {
        func_t f = {0};
        ident(&p);
        f.name = ident(&p);
        expect(&p, '(');
        for (;;) {
            f.psym[f.nparams] = ident(&p);
            expect(&p, ':');
            f.pty[f.nparams++] = ident(&p) == kw.int_ ? TY_INT : TY_STR;
            if (is_punct(&p.t[p.pos++], ')')) break;
        }
        p.pos++; /* -> */
        f.ret = ident(&p) == kw.int_ ? TY_INT : TY_STR;
        expect(&p, '{');
        f.body = parse_block(&p);
        PUSH(funcs, nfuncs, cap, f);
    }
    for (size_t i = 0; i < toks.n; i++) free(toks.t[i].str);
    free(toks.t);

    checker_t c = {xmalloc(sizeof(ty_t *) * nfuncs), nfuncs, xmalloc(sizeof(uint32_t) * nfuncs), names, NULL, 0, 0};
    for (size_t f = 0; f < nfuncs; f++) {
        ty_t *t = ty_new(TY_FN);
        t->nparams = funcs[f].nparams;
        t->params = xmalloc(sizeof(ty_t *) * (size_t)t->nparams);
        for (int i = 0; i < t->nparams; i++) t->params[i] = ty_new(funcs[f].pty[i]);
        t->ret = ty_new(funcs[f].ret);
        c.fn_types[f] = t;
        c.fn_syms[f] = funcs[f].name;
    }
    for (size_t f = 0; f < nfuncs; f++) {
        scope_t scope = {0};
        for (int i = 0; i < funcs[f].nparams; i++) {
            binding_t b = {funcs[f].psym[i], ty_new(funcs[f].pty[i])};
            PUSH(scope.b, scope.n, scope.cap, b);
        }
        check_block(&c, &funcs[f].body, &scope, funcs[f].ret);
        for (size_t j = 0; j < scope.n; j++) ty_free(scope.b[j].ty);
        free(scope.b);
    }
    for (size_t f = 0; f < nfuncs; f++) ty_free(c.fn_types[f]);
    free(c.fn_types);
    free(c.fn_syms);

    output_t *o = calloc(1, sizeof *o);
    if (!o) abort();
    o->diag = c.diag;
    o->ndiag = c.ndiag;
    uint64_t h = 0;
    for (size_t i = 0; i < o->ndiag; i++) h += strlen(o->diag[i]);
    h = mix(0, h);
    o->funcs = xmalloc(sizeof(irfunc_t) * nfuncs);
    for (size_t f = 0; f < nfuncs; f++) {
        lowering_t lw = {0};
        new_block(&lw, "entry");
        lower_block(&lw, &funcs[f].body);
        for (size_t b = 0; b < lw.n; b++) {
            h = mix(h, strlen(lw.blocks[b].label));
            for (size_t i = 0; i < lw.blocks[b].n; i++) {
                const inst_t *in = &lw.blocks[b].insts[i];
                h = mix(h, (uint64_t)in->op ^ (uint64_t)in->dst << 8);
                for (size_t a = 0; a < in->nargs; a++) {
                    const operand_t *op = &in->args[a];
                    h = mix(h, op->kind == O_CONST  ? (uint64_t)op->v
                               : op->kind == O_TEMP ? 1 + (uint64_t)op->v
                               : op->kind == O_STR  ? 3 + strlen(op->str)
                                                    : 2 + strlen(names->names[op->v]));
                }
            }
        }
        o->funcs[f] = (irfunc_t){xprintf("%s", names->names[funcs[f].name]), lw.blocks, lw.n, lw.cap};
        free_body(&funcs[f].body);
    }
    o->nfuncs = nfuncs;
    free(funcs);
    *hash = h;
    return o;
}

static uint64_t output_hash(const output_t *o) {
    uint64_t h = o->ndiag;
    for (size_t f = 0; f < o->nfuncs; f++) {
        uint64_t n = strlen(o->funcs[f].name);
        for (size_t b = 0; b < o->funcs[f].n; b++) n += o->funcs[f].blocks[b].n;
        h = mix(h, n);
    }
    return h;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    size_t modules = scaled(MODULES, scale, 4);
    double t0 = now_ms();
    interner_t names = {0};
    output_t *kept[KEPT + 1];
    size_t nkept = 0;
    uint64_t h = 0;
    for (size_t id = 0; id < modules; id++) {
        uint64_t mh;
        output_t *o = compile(id, &names, &mh);
        h += mix(id, mh);
        kept[nkept++] = o;
        if (nkept > KEPT) {
            h += output_hash(kept[0]);
            free_output(kept[0]);
            memmove(kept, kept + 1, KEPT * sizeof kept[0]);
            nkept--;
        }
    }
    for (size_t i = 0; i < nkept; i++) {
        h += output_hash(kept[i]);
        free_output(kept[i]);
    }
    for (uint32_t i = 0; i < names.n; i++) free(names.names[i]);
    free(names.names);
    free(names.slots);
    report("c-compiler", scale, 1, now_ms() - t0, h, "");
    return 0;
}
