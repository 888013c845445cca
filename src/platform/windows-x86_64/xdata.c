/* xdata.c -- the x64 unwind data of a function (UNWIND_INFO and its
 * unwind codes, in an image's .xdata or in memory a JIT registered):
 * reduced to a compact rule for a call site, or interpreted one frame at a
 * time with every stack read checked.
 *
 * References: Microsoft, "x64 exception handling" (UNWIND_INFO,
 * UNWIND_CODE, chained unwind info, the unwind procedure) and the PE/COFF
 * specification (.pdata). Semantics followed, one frame at a call site:
 *   - codes are stored last prolog operation first and are undone in that
 *     order; in the primary info, a code whose CodeOffset lies beyond the pc's
 *     offset in the prolog has not run yet (a call in a prolog: __chkstk);
 *   - offsets of UWOP_SAVE_* are from the establisher frame: rsp in the
 *     body, or FrameRegister - 16 * FrameOffset when the info names a
 *     frame register; UWOP_SET_FPREG makes rsp that frame;
 *   - UNW_FLAG_CHAININFO continues with the parent's codes (all of them);
 *   - UWOP_PUSH_MACHFRAME pops a hardware frame: rip at +0, rsp at +24
 *     (+8 each with an error code), and the caller's pc is then an
 *     interrupted instruction, not a return address;
 *   - version 2 adds UWOP_EPILOG descriptors, which a prolog unwind skips;
 *   - an interrupted instruction may lie in an epilog, which has a fixed
 *     form ("add rsp, imm" or "lea rsp, [frame register + disp]", pops,
 *     then ret or a jmp out of the function): its remaining instructions
 *     are emulated instead.
 *
 * Never allocates, takes no lock, never faults: image unwind data is read
 * only inside the image, stack reads go through ht__rd(). Unwind data of
 * JIT code is trusted as registered. */
#include "unwind.h"

enum {
    UWOP_PUSH_NONVOL = 0, UWOP_ALLOC_LARGE = 1, UWOP_ALLOC_SMALL = 2, UWOP_SET_FPREG = 3,
    UWOP_SAVE_NONVOL = 4, UWOP_SAVE_NONVOL_FAR = 5, UWOP_EPILOG = 6, UWOP_SPARE = 7,
    UWOP_SAVE_XMM128 = 8, UWOP_SAVE_XMM128_FAR = 9, UWOP_PUSH_MACHFRAME = 10
};

#define MAX_CHAIN 32        /* chained infos followed before giving up */

typedef struct uop_s {
    unsigned op, info;      /* UnwindOp and OpInfo */
    uint32_t val;           /* the operand slots, as a size or an offset */
} uop_t;

/* Walks the executed unwind codes of a function and its chained parents. */
typedef struct opit_s {
    const ht_fnent_t *e;
    uintptr_t pc;
    const uint8_t *info;
    unsigned version, flags, count, i;
    unsigned frame_reg, frame_off;  /* of the current info */
    unsigned prolog_off;
    int in_prolog;                  /* filter codes by prolog offset */
    int depth;
} opit_t;

static int in_image(const ht_fnent_t *e, uintptr_t p, size_t n)
{
    if (!e->image_end)
        return 1;                   /* registered by a JIT: trusted */
    return p >= e->base && p + n >= p && p + n <= e->image_end;
}

static unsigned u16(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

/* Loads the UNWIND_INFO of `fn`. Returns 1, or 0 if it is malformed, lies
 * outside its image, or has a version this code does not know. */
static int it_load(opit_t *it, const RUNTIME_FUNCTION *fn)
{
    const ht_fnent_t *e = it->e;
    if (!in_image(e, (uintptr_t)fn, sizeof *fn))
        return 0;
    uint32_t ud = fn->UnwindData;
    if (ud & 1) {
        /* an indirect entry: UnwindData - 1 is the RVA of the real one */
        fn = (const RUNTIME_FUNCTION *)(e->base + ud - 1);
        if (!in_image(e, (uintptr_t)fn, sizeof *fn) || (fn->UnwindData & 1))
            return 0;
        ud = fn->UnwindData;
    }
    uintptr_t ia = e->base + ud;
    if (!in_image(e, ia, 4))
        return 0;
    const uint8_t *h = (const uint8_t *)ia;
    it->version = h[0] & 7;
    it->flags = h[0] >> 3;
    it->count = h[2];
    it->frame_reg = h[3] & 15;
    it->frame_off = h[3] >> 4;
    if (it->version != 1 && it->version != 2)
        return 0;
    size_t len = 4 + 2 * ((it->count + 1u) & ~1u);
    if (it->flags & UNW_FLAG_CHAININFO)
        len += sizeof(RUNTIME_FUNCTION);
    if (!in_image(e, ia, len))
        return 0;
    it->info = h;
    it->i = 0;
    uintptr_t begin = e->base + fn->BeginAddress;
    it->in_prolog = it->pc >= begin && it->pc - begin < h[1];
    it->prolog_off = (unsigned)(it->pc - begin);
    return 1;
}

static int it_begin(opit_t *it, const ht_fnent_t *e, uintptr_t pc)
{
    it->e = e;
    it->pc = pc;
    it->depth = 0;
    return it_load(it, e->fn);
}

/* Slots an unwind code takes, 0 if unknown. */
static unsigned op_slots(unsigned op, unsigned info, unsigned version)
{
    switch (op) {
    case UWOP_PUSH_NONVOL:
    case UWOP_ALLOC_SMALL:
    case UWOP_SET_FPREG:
    case UWOP_PUSH_MACHFRAME:
        return 1;
    case UWOP_ALLOC_LARGE:
        return info == 0 ? 2 : info == 1 ? 3 : 0;
    case UWOP_SAVE_NONVOL:
    case UWOP_SAVE_XMM128:
        return 2;
    case UWOP_SAVE_NONVOL_FAR:
    case UWOP_SAVE_XMM128_FAR:
        return 3;
    case UWOP_EPILOG:
        return version == 2 ? 1 : 0;
    default:
        return 0;
    }
}

/* The next executed code of the current info: 1 and *o, 0 at its end, -1
 * on malformed codes. */
static int it_next(opit_t *it, uop_t *o)
{
    while (it->i < it->count) {
        const uint8_t *c = it->info + 4 + 2 * it->i;
        unsigned code_off = c[0], op = c[1] & 15, info = c[1] >> 4;
        unsigned n = op_slots(op, info, it->version);
        if (!n || it->i + n > it->count)
            return -1;
        it->i += n;
        if (op == UWOP_EPILOG)
            continue;           /* describes an epilog, not the prolog */
        if (it->in_prolog && code_off > it->prolog_off)
            continue;           /* not executed yet at pc */
        o->op = op;
        o->info = info;
        o->val = n == 2 ? u16(c + 2) : n == 3 ? (u16(c + 2) | (uint32_t)u16(c + 4) << 16) : 0;
        return 1;
    }
    return 0;
}

/* Moves to the chained parent info: 1, 0 if there is none, -1 if bad. */
static int it_chain(opit_t *it)
{
    if (!(it->flags & UNW_FLAG_CHAININFO))
        return 0;
    if (++it->depth > MAX_CHAIN)
        return -1;
    const RUNTIME_FUNCTION *parent =
        (const RUNTIME_FUNCTION *)(it->info + 4 + 2 * ((it->count + 1u) & ~1u));
    return it_load(it, parent) ? 1 : -1;
}

static uint64_t alloc_size(const uop_t *o)
{
    if (o->op == UWOP_ALLOC_SMALL)
        return (uint64_t)o->info * 8 + 8;
    return o->info ? o->val : (uint64_t)o->val * 8;
}

/* ---- the compact rule ----------------------------------------------------
 * Runs the codes symbolically: every address is (base, offset) with base 0
 * = rsp at the call site, 1 = the frame register's value there. */

ht_rule_t ht__xdata_rule(const ht_fnent_t *e, uintptr_t ra)
{
    ht_rule_t r = { .u = 0 };
    r.s.kind = HT_K_NORMAL;
    if (!e->fn)
        return r;               /* leaf: the return address is at rsp */
    r.s.kind = HT_K_STOP;
    opit_t it;
    if (!it_begin(&it, e, ra))
        return r;
    int cur_b = 0, fr_b = 0, rbp_b = -1;
    int64_t cur = 0, fr = 0, rbp_at = 0;
    unsigned fr_reg = 0;
    uint32_t restored = 0;
    for (;;) {
        if (it.frame_reg) {
            if ((fr_reg && it.frame_reg != fr_reg) || (restored & (1u << it.frame_reg)))
                goto complex;   /* the establisher moves between infos */
            fr_reg = it.frame_reg;
            fr_b = 1;
            fr = -16 * (int64_t)it.frame_off;
        }
        uop_t o;
        int k;
        while ((k = it_next(&it, &o)) == 1) {
            switch (o.op) {
            case UWOP_PUSH_NONVOL:
                if (o.info == HT_RSP)
                    return r;
                if (o.info == HT_RBP) {
                    rbp_b = cur_b;
                    rbp_at = cur;
                }
                restored |= 1u << o.info;
                cur += 8;
                break;
            case UWOP_ALLOC_LARGE:
            case UWOP_ALLOC_SMALL:
                cur += (int64_t)alloc_size(&o);
                break;
            case UWOP_SET_FPREG:
                if (!it.frame_reg)
                    return r;
                cur_b = fr_b;
                cur = fr;
                break;
            case UWOP_SAVE_NONVOL:
            case UWOP_SAVE_NONVOL_FAR:
                if (o.info == HT_RSP)
                    return r;
                if (o.info == HT_RBP) {
                    rbp_b = fr_b;
                    rbp_at = fr + (o.op == UWOP_SAVE_NONVOL ? (int64_t)o.val * 8 : (int64_t)o.val);
                }
                restored |= 1u << o.info;
                break;
            case UWOP_SAVE_XMM128:
            case UWOP_SAVE_XMM128_FAR:
                break;          /* xmm registers play no part in a walk */
            case UWOP_PUSH_MACHFRAME:
                goto complex;
            default:
                return r;
            }
            if (cur > INT32_MAX || cur < INT32_MIN)
                goto complex;
        }
        if (k < 0)
            return r;
        k = it_chain(&it);
        if (k < 0)
            return r;
        if (k == 0)
            break;
    }
    /* the return address is at (cur_b, cur) */
    if (cur_b == 1 && fr_reg != HT_RBP)
        goto complex;           /* needs a register the fast walk does not track */
    if (rbp_b >= 0) {
        int64_t d = rbp_at - cur;
        if (rbp_b != cur_b || d != (int16_t)d)
            goto complex;
        r.s.rbp_off = (int16_t)d;
        r.s.flags |= HT_RF_RBP_SAVED;
    }
    if (cur_b)
        r.s.flags |= HT_RF_BASE_RBP;
    r.s.ra_off = (int32_t)cur;
    r.s.kind = HT_K_NORMAL;
    return r;
complex:
    r.u = 0;
    r.s.kind = HT_K_COMPLEX;
    return r;
}

/* ---- one frame, concretely ----------------------------------------------- */

int ht__xdata_step(const ht_fnent_t *e, ht_wregs_t *r, const ht_bounds_t *b, int *exact_next)
{
    uintptr_t sp0 = r->r[HT_RSP], v;
    *exact_next = 0;
    if (!e->fn) {
        if (!ht__rd(b, sp0, &v))
            return HT_STEP_STOP;
        r->pc = v;
        r->r[HT_RSP] = sp0 + 8;
        return HT_STEP_OK;
    }
    opit_t it;
    if (!it_begin(&it, e, r->pc))
        return HT_STEP_STOP;
    uintptr_t cur = sp0, frame = sp0, mpc = 0, msp = 0;
    int mach = 0;
    for (;;) {
        if (it.frame_reg) {
            if (!(r->valid & (1u << it.frame_reg)))
                return HT_STEP_NEED_FULL;
            frame = r->r[it.frame_reg] - 16 * (uintptr_t)it.frame_off;
        }
        uop_t o;
        int k;
        while ((k = it_next(&it, &o)) == 1) {
            if (mach)
                return HT_STEP_STOP;    /* nothing can precede a machine frame */
            switch (o.op) {
            case UWOP_PUSH_NONVOL:
                if (o.info == HT_RSP || !ht__rd(b, cur, &v))
                    return HT_STEP_STOP;
                r->r[o.info] = v;
                r->valid |= 1u << o.info;
                cur += 8;
                break;
            case UWOP_ALLOC_LARGE:
            case UWOP_ALLOC_SMALL:
                cur += (uintptr_t)alloc_size(&o);
                break;
            case UWOP_SET_FPREG:
                if (!it.frame_reg)
                    return HT_STEP_STOP;
                cur = frame;
                break;
            case UWOP_SAVE_NONVOL:
            case UWOP_SAVE_NONVOL_FAR: {
                uintptr_t at = frame + (o.op == UWOP_SAVE_NONVOL ? (uintptr_t)o.val * 8 : o.val);
                if (o.info == HT_RSP || !ht__rd(b, at, &v))
                    return HT_STEP_STOP;
                r->r[o.info] = v;
                r->valid |= 1u << o.info;
                break;
            }
            case UWOP_SAVE_XMM128:
            case UWOP_SAVE_XMM128_FAR:
                break;
            case UWOP_PUSH_MACHFRAME: {
                uintptr_t at = cur + (o.info ? 8 : 0);
                if (!ht__rd(b, at, &mpc) || !ht__rd(b, at + 24, &msp))
                    return HT_STEP_STOP;
                mach = 1;
                break;
            }
            default:
                return HT_STEP_STOP;
            }
        }
        if (k < 0)
            return HT_STEP_STOP;
        k = it_chain(&it);
        if (k < 0)
            return HT_STEP_STOP;
        if (k == 0)
            break;
    }
    if (mach) {
        r->pc = mpc;
        r->r[HT_RSP] = msp;
        *exact_next = 1;
    } else {
        if (!ht__rd(b, cur, &v))
            return HT_STEP_STOP;
        r->pc = v;
        r->r[HT_RSP] = cur + 8;
    }
    if (r->r[HT_RSP] <= sp0 || r->r[HT_RSP] > b->hi)
        return HT_STEP_STOP;
    return HT_STEP_OK;
}

/* ---- interrupted instructions ----------------------------------------------
 * An interrupted pc may lie in a prolog (the codes are filtered by its
 * offset, as for a call site) or in an epilog, recognised by decoding the
 * code at pc and emulated. Code bytes are read only inside the image (or the
 * function, for JIT code). */

#define EPI_MAX_INSNS 24

typedef struct code_s {
    uintptr_t lo, hi;           /* readable code: the image, or the function */
    uintptr_t fn_lo, fn_hi;     /* the function, for jmp targets */
} code_t;

static int cb(const code_t *c, uintptr_t p, unsigned n, const uint8_t **out)
{
    if (p < c->lo || p + n > c->hi || p + n < p)
        return 0;
    *out = (const uint8_t *)p;
    return 1;
}

static int32_t s32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Decodes the epilog starting at pc and, if `r` is not NULL, applies it.
 * Returns 1 if pc lies in an epilog (and, applying, the step succeeded),
 * 0 if it does not, -1 if applying failed (a read outside the stack),
 * -2 if it needs a register r lacks. */
static int epilog(const code_t *c, uintptr_t pc, ht_wregs_t *r, const ht_bounds_t *b)
{
    const uint8_t *q;
    uintptr_t p = pc, v;
    int may_adjust = 1, jumps = 0;
    for (int n = 0; n < EPI_MAX_INSNS; n++) {
        if (!cb(c, p, 1, &q))
            return 0;
        unsigned rex = (q[0] & 0xf0) == 0x40 ? q[0] : 0, pre = rex ? 1 : 0;
        if (!cb(c, p, pre + 1, &q))
            return 0;
        unsigned op = q[pre];
        if (may_adjust && rex == 0x48 && cb(c, p, 3, &q)) {
            /* first: add rsp, imm8 / imm32, or lea rsp, [reg + disp8 / disp32] */
            if ((op == 0x83 || op == 0x81) && q[2] == 0xc4) {
                unsigned len = op == 0x83 ? 4 : 7;
                if (!cb(c, p, len, &q))
                    return 0;
                if (r)
                    r->r[HT_RSP] += (uintptr_t)(op == 0x83 ? (intptr_t)(int8_t)q[3] : (intptr_t)s32(q + 3));
                p += len;
                may_adjust = 0;
                continue;
            }
        }
        if (may_adjust && (rex & 0xfc) == 0x48 && op == 0x8d && cb(c, p, 3, &q)) {
            unsigned modrm = q[2], mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
            if (reg == 4 && rm != 4 && (mod == 1 || mod == 2)) {
                unsigned base = rm + ((rex & 1) ? 8 : 0), len = mod == 1 ? 4 : 7;
                if (!cb(c, p, len, &q))
                    return 0;
                if (r) {
                    if (!(r->valid & (1u << base)))
                        return -2;
                    intptr_t d = mod == 1 ? (intptr_t)(int8_t)q[3] : (intptr_t)s32(q + 3);
                    r->r[HT_RSP] = r->r[base] + (uintptr_t)d;
                }
                p += len;
                may_adjust = 0;
                continue;
            }
        }
        may_adjust = 0;
        if (op >= 0x58 && op <= 0x5f && (rex == 0 || rex == 0x40 || rex == 0x41)) {
            /* pop reg */
            unsigned reg = (op - 0x58u) + ((rex & 1) ? 8 : 0);
            if (r) {
                if (reg == HT_RSP || !ht__rd(b, r->r[HT_RSP], &v))
                    return -1;
                r->r[reg] = v;
                r->valid |= 1u << reg;
                r->r[HT_RSP] += 8;
            }
            p += pre + 1;
            continue;
        }
        uintptr_t extra = 0;
        if (rex == 0 && op == 0xc3) {
            /* ret */
        } else if (rex == 0 && op == 0xf3 && cb(c, p, 2, &q) && q[1] == 0xc3) {
            /* rep ret */
        } else if (rex == 0 && op == 0xc2 && cb(c, p, 3, &q)) {
            extra = (uintptr_t)q[1] | (uintptr_t)q[2] << 8;     /* ret imm16 */
        } else if ((rex == 0 || rex == 0x48) && op == 0xff && cb(c, p, pre + 6, &q) &&
                   q[pre + 1] == 0x25) {
            /* jmp [rip + disp32]: a tail call */
        } else if (rex == 0 && (op == 0xe9 || op == 0xeb)) {
            unsigned len = op == 0xe9 ? 5 : 2;
            if (!cb(c, p, len, &q))
                return 0;
            uintptr_t t = p + len + (uintptr_t)(op == 0xe9 ? (intptr_t)s32(q + 1) : (intptr_t)(int8_t)q[1]);
            if (t >= c->fn_lo && t < c->fn_hi) {
                /* a jump to an epilog shared inside the function: follow it */
                if (++jumps > 4)
                    return 0;
                p = t;
                may_adjust = 1;
                continue;
            }
            /* out of the function: a tail call */
        } else {
            return 0;
        }
        if (r) {
            if (!ht__rd(b, r->r[HT_RSP], &v))
                return -1;
            r->pc = v;
            r->r[HT_RSP] += 8 + extra;
        }
        return 1;
    }
    return 0;
}

int ht__xdata_step_exact(const ht_fnent_t *e, ht_wregs_t *r, const ht_bounds_t *b,
                         int *exact_next)
{
    *exact_next = 0;
    if (!e->fn)
        return ht__xdata_step(e, r, b, exact_next);     /* a leaf */
    const RUNTIME_FUNCTION *fn = e->fn;
    if (!in_image(e, (uintptr_t)fn, sizeof *fn))
        return HT_STEP_STOP;
    if (fn->UnwindData & 1) {
        fn = (const RUNTIME_FUNCTION *)(e->base + fn->UnwindData - 1);
        if (!in_image(e, (uintptr_t)fn, sizeof *fn))
            return HT_STEP_STOP;
    }
    const uint8_t *h = (const uint8_t *)(e->base + fn->UnwindData);
    if (!in_image(e, (uintptr_t)h, 4))
        return HT_STEP_STOP;
    code_t c;
    c.fn_lo = e->base + fn->BeginAddress;
    c.fn_hi = e->base + fn->EndAddress;
    c.lo = e->image_end ? e->base : c.fn_lo;
    c.hi = e->image_end ? e->image_end : c.fn_hi;
    /* in the prolog (by the primary info's size) the codes decide; past
     * it, an epilog is recognised by its code */
    if (!(r->pc >= c.fn_lo && r->pc - c.fn_lo < h[1]) && epilog(&c, r->pc, NULL, b) == 1) {
        uintptr_t sp0 = r->r[HT_RSP];
        ht_wregs_t t = *r;
        int k = epilog(&c, r->pc, &t, b);
        if (k == -2)
            return HT_STEP_NEED_FULL;
        if (k != 1 || t.r[HT_RSP] <= sp0 || t.r[HT_RSP] > b->hi)
            return HT_STEP_STOP;
        *r = t;
        return HT_STEP_OK;
    }
    return ht__xdata_step(e, r, b, exact_next);
}
