/* cfi.c -- .eh_frame_hdr lookup, CIE/FDE parsing, the CFA program
 * interpreter and the DWARF expression evaluator (DWARF 4 section 6.4 and
 * the LSB's .eh_frame specification).
 *
 * Async-signal-safe, never allocates. Module tables are read through a
 * cursor bounded by the PT_LOAD segment that holds them, so malformed CFI
 * ends in HT_CFI_BAD, never in a fault. */
#include "cfi.h"

/* ---- bounded cursor over unwind tables -------------------------------- */

typedef struct {
    const uint8_t *p, *lo, *end;
    int bad;
    intptr_t bias;              /* pc-relative pointers: relative to p + bias */
} cursor_t;

static inline int cur_has(cursor_t *c, size_t n)
{
    if (c->bad || c->p < c->lo || c->p > c->end || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return 0;
    }
    return 1;
}

static uint64_t cur_fixed(cursor_t *c, size_t n)
{
    if (!cur_has(c, n))
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

static uint64_t cur_uleb(cursor_t *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (!cur_has(c, 1))
            return 0;
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
        if (shift > 63) {
            c->bad = 1;
            return 0;
        }
    }
}

static int64_t cur_sleb(cursor_t *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        if (!cur_has(c, 1))
            return 0;
        b = *c->p++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (shift > 70) {
            c->bad = 1;
            return 0;
        }
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

/* DW_EH_PE_* pointer encodings */
enum {
    PE_absptr = 0x00, PE_uleb128 = 0x01, PE_udata2 = 0x02, PE_udata4 = 0x03,
    PE_udata8 = 0x04, PE_sleb128 = 0x09, PE_sdata2 = 0x0a, PE_sdata4 = 0x0b,
    PE_sdata8 = 0x0c, PE_pcrel = 0x10, PE_datarel = 0x30, PE_indirect = 0x80,
    PE_omit = 0xff
};

/* Reads a pointer in encoding `enc`. `datarel` is the base for
 * DW_EH_PE_datarel (the .eh_frame_hdr start there; unused in .eh_frame).
 * Indirect pointers are only skipped (we never need their target). */
static uintptr_t cur_encoded(cursor_t *c, uint8_t enc, uintptr_t datarel)
{
    if (enc == PE_omit)
        return 0;
    uintptr_t at = (uintptr_t)c->p, v;
    switch (enc & 0x0f) {
    case PE_absptr: v = (uintptr_t)cur_fixed(c, 8); break;
    case PE_uleb128: v = (uintptr_t)cur_uleb(c); break;
    case PE_udata2: v = (uintptr_t)cur_fixed(c, 2); break;
    case PE_udata4: v = (uintptr_t)cur_fixed(c, 4); break;
    case PE_udata8: v = (uintptr_t)cur_fixed(c, 8); break;
    case PE_sleb128: v = (uintptr_t)cur_sleb(c); break;
    case PE_sdata2: v = (uintptr_t)(int64_t)(int16_t)cur_fixed(c, 2); break;
    case PE_sdata4: v = (uintptr_t)(int64_t)(int32_t)cur_fixed(c, 4); break;
    case PE_sdata8: v = (uintptr_t)cur_fixed(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0: break;
    case PE_pcrel: v += at + (uintptr_t)c->bias; break;
    case PE_datarel: v += datarel; break;
    default: c->bad = 1; return 0;  /* textrel/funcrel/aligned: unused on x86-64 */
    }
    return v;
}

/* ---- CIE and FDE ------------------------------------------------------ */

typedef struct {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int has_z, signal_frame;
    const uint8_t *insns, *insns_end;
    intptr_t bias;              /* of the section (cursor_t) */
} cie_t;

/* Parses the CIE at `p` of a section whose pc-relative pointers are
 * relative to their address + `bias`. Returns 0 on success. */
static int parse_cie(const uint8_t *p, const uint8_t *lo, const uint8_t *hi, intptr_t bias, cie_t *cie)
{
    cursor_t c = { p, lo, hi, 0, bias };
    uint64_t len = cur_fixed(&c, 4);
    if (len == 0xffffffffu)
        len = cur_fixed(&c, 8);
    const uint8_t *body = c.p;
    if (c.bad || len < 4 || len > (uint64_t)(hi - body))
        return -1;
    c.end = body + len;
    if (cur_fixed(&c, 4) != 0)          /* CIE id in .eh_frame is 0 */
        return -1;
    uint8_t version = (uint8_t)cur_fixed(&c, 1);
    if (version != 1 && version != 3 && version != 4)
        return -1;
    const uint8_t *aug = c.p;
    while (cur_has(&c, 1) && *c.p)
        c.p++;
    if (!cur_has(&c, 1))
        return -1;
    c.p++;
    if (version == 4) {
        if (cur_fixed(&c, 1) != 8)      /* address size */
            return -1;
        cur_fixed(&c, 1);               /* segment selector size */
    }
    cie->code_align = cur_uleb(&c);
    cie->data_align = cur_sleb(&c);
    cie->ra_reg = version == 1 ? cur_fixed(&c, 1) : cur_uleb(&c);
    cie->fde_enc = PE_absptr;
    cie->has_z = cie->signal_frame = 0;
    cie->bias = bias;
    const uint8_t *aug_end = NULL;
    for (const uint8_t *a = aug; *a; a++) {
        switch (*a) {
        case 'z': {
            if (a != aug)
                return -1;
            uint64_t alen = cur_uleb(&c);
            if (c.bad || alen > (uint64_t)(c.end - c.p))
                return -1;
            aug_end = c.p + alen;
            cie->has_z = 1;
            break;
        }
        case 'R': cie->fde_enc = (uint8_t)cur_fixed(&c, 1); break;
        case 'P': {
            uint8_t enc = (uint8_t)cur_fixed(&c, 1);
            cur_encoded(&c, enc & 0x7f, 0);
            break;
        }
        case 'L': cur_fixed(&c, 1); break;
        case 'S': cie->signal_frame = 1; break;
        case 'B': break;
        default:
            /* unknown augmentation: only safe to skip with 'z' */
            if (!aug_end)
                return -1;
            c.p = aug_end;
            goto done;
        }
    }
done:
    if (aug_end)
        c.p = aug_end;
    if (c.bad || cie->code_align == 0)
        return -1;
    cie->insns = c.p;
    cie->insns_end = c.end;
    return 0;
}

typedef struct {
    uintptr_t pc_begin, pc_end;
    const uint8_t *insns, *insns_end;
    cie_t cie;
} fde_t;

/* Parses the FDE at `p` (with its CIE). Returns 0, or -1 if malformed,
 * or 1 if `p` is a CIE or the terminator. */
static int parse_fde(const uint8_t *p, const uint8_t *lo, const uint8_t *hi, intptr_t bias, fde_t *f,
                     const uint8_t **next)
{
    cursor_t c = { p, lo, hi, 0, bias };
    uint64_t len = cur_fixed(&c, 4);
    if (len == 0xffffffffu)
        len = cur_fixed(&c, 8);
    const uint8_t *body = c.p;
    if (c.bad || len > (uint64_t)(hi - body))
        return -1;
    if (next)
        *next = body + len;
    if (len == 0)
        return 1;                       /* terminator */
    if (len < 4)
        return -1;
    c.end = body + len;
    const uint8_t *idp = c.p;
    uint32_t cie_off = (uint32_t)cur_fixed(&c, 4);
    if (cie_off == 0)
        return 1;                       /* a CIE */
    const uint8_t *ciep = idp - cie_off;
    if (ciep < lo || ciep >= hi || parse_cie(ciep, lo, hi, bias, &f->cie) != 0)
        return -1;
    f->pc_begin = cur_encoded(&c, f->cie.fde_enc, 0);
    f->pc_end = f->pc_begin + cur_encoded(&c, f->cie.fde_enc & 0x0f, 0);
    if (f->cie.has_z) {
        uint64_t alen = cur_uleb(&c);
        if (c.bad || alen > (uint64_t)(c.end - c.p))
            return -1;
        c.p += alen;
    }
    if (c.bad)
        return -1;
    f->insns = c.p;
    f->insns_end = c.end;
    return 0;
}

/* Finds the FDE covering pc by walking an .eh_frame section from `start`
 * to its zero terminator (or `hi`). */
static int scan_eh_frame(const uint8_t *start, const uint8_t *lo, const uint8_t *hi, intptr_t bias,
                         uintptr_t pc, fde_t *f)
{
    if (start < lo || start >= hi)
        return HT_CFI_BAD;
    for (const uint8_t *p = start, *next; p < hi; p = next) {
        int r = parse_fde(p, lo, hi, bias, f, &next);
        if (r < 0)
            return HT_CFI_BAD;
        if (next == p + 4 && r == 1)    /* zero terminator */
            break;
        if (r == 0 && pc >= f->pc_begin && pc < f->pc_end)
            return HT_CFI_OK;
        if (next <= p)
            return HT_CFI_BAD;
    }
    return HT_CFI_NONE;
}

/* Finds the FDE covering pc through .eh_frame_hdr's sorted table, or by a
 * linear scan of .eh_frame when the table is absent or unusual. */
static int find_fde(const ht_module_t *m, uintptr_t pc, fde_t *f)
{
    const uint8_t *lo = (const uint8_t *)m->rd_lo, *hi = (const uint8_t *)m->rd_hi;
    const uint8_t *hdr = (const uint8_t *)m->eh_hdr;
    cursor_t c = { hdr, lo, hi, 0, 0 };
    uint8_t version = (uint8_t)cur_fixed(&c, 1);
    uint8_t eh_enc = (uint8_t)cur_fixed(&c, 1);
    uint8_t cnt_enc = (uint8_t)cur_fixed(&c, 1);
    uint8_t tab_enc = (uint8_t)cur_fixed(&c, 1);
    if (c.bad || version != 1)
        return HT_CFI_BAD;
    const uint8_t *eh_frame = (const uint8_t *)cur_encoded(&c, eh_enc, (uintptr_t)hdr);
    uint64_t count = cnt_enc == PE_omit ? 0 : cur_encoded(&c, cnt_enc, (uintptr_t)hdr);
    if (c.bad)
        return HT_CFI_BAD;

    if (tab_enc == (PE_datarel | PE_sdata4) && count > 0) {
        const uint8_t *tab = c.p;
        if (count > (uint64_t)(hi - tab) / 8)
            return HT_CFI_BAD;
        /* largest initial location <= pc */
        intptr_t rel = (intptr_t)(pc - (uintptr_t)hdr);
        uint64_t l = 0, r = count;
        while (l < r) {
            uint64_t mid = l + (r - l) / 2;
            int32_t loc;
            __builtin_memcpy(&loc, tab + mid * 8, 4);
            if ((intptr_t)loc <= rel)
                l = mid + 1;
            else
                r = mid;
        }
        if (l == 0)
            return HT_CFI_NONE;
        int32_t fde_rel;
        __builtin_memcpy(&fde_rel, tab + (l - 1) * 8 + 4, 4);
        const uint8_t *fp = hdr + fde_rel;
        if (parse_fde(fp, lo, hi, 0, f, NULL) != 0)
            return HT_CFI_BAD;
        return pc >= f->pc_begin && pc < f->pc_end ? HT_CFI_OK : HT_CFI_NONE;
    }

    /* no usable table: walk .eh_frame to its terminator */
    return scan_eh_frame(eh_frame, lo, hi, 0, pc, f);
}

/* ---- the CFA program -------------------------------------------------- */

#define STATE_STACK 4

/* Runs instructions [p, end) against `row`, stopping before the first row
 * that starts beyond `pc`. `init` is the CIE's initial row (for
 * DW_CFA_restore), NULL while running the CIE itself. */
static int run_program(const uint8_t *p, const uint8_t *end, const cie_t *cie,
                       const uint8_t *lo, const uint8_t *hi, uintptr_t *loc,
                       uintptr_t pc, ht_cfi_row_t *row, const ht_cfi_row_t *init)
{
    cursor_t c = { p, lo, end > hi ? hi : end, 0, cie->bias };
    ht_cfi_rule_t saved_cfa[STATE_STACK];
    ht_cfi_rule_t saved_reg[STATE_STACK][HT_DW_NREGS];
    int depth = 0;

    while (c.p < c.end && !c.bad) {
        uint8_t op = *c.p++;
        uint64_t reg = 0, adv = 0;
        int64_t off = 0;
        ht_cfi_rule_t rule = { 0, 0, 0, 0, NULL };
        int set = 0;

        switch (op >> 6) {
        case 1: adv = op & 0x3f; goto advance;
        case 2:
            reg = op & 0x3f;
            rule.how = HT_RULE_OFFSET;
            off = (int64_t)cur_uleb(&c) * cie->data_align;
            set = 1;
            goto apply;
        case 3:
            reg = op & 0x3f;
            goto restore;
        }
        switch (op) {
        case 0x00: continue;                              /* nop */
        case 0x01: {                                      /* set_loc */
            uintptr_t nl = cur_encoded(&c, cie->fde_enc, 0);
            if (nl > pc)
                return c.bad ? -1 : 0;
            *loc = nl;
            continue;
        }
        case 0x02: adv = cur_fixed(&c, 1); goto advance;
        case 0x03: adv = cur_fixed(&c, 2); goto advance;
        case 0x04: adv = cur_fixed(&c, 4); goto advance;
        case 0x05:                                        /* offset_extended */
            reg = cur_uleb(&c);
            off = (int64_t)cur_uleb(&c) * cie->data_align;
            rule.how = HT_RULE_OFFSET; set = 1;
            goto apply;
        case 0x06: reg = cur_uleb(&c); goto restore;      /* restore_extended */
        case 0x07: reg = cur_uleb(&c); rule.how = HT_RULE_UNDEFINED; set = 1; goto apply;
        case 0x08: reg = cur_uleb(&c); rule.how = HT_RULE_SAME; set = 1; goto apply;
        case 0x09:                                        /* register */
            reg = cur_uleb(&c);
            {
                uint64_t r2 = cur_uleb(&c);
                if (r2 >= HT_DW_NREGS)
                    return -1;
                rule.reg = (uint8_t)r2;
            }
            rule.how = HT_RULE_REGISTER; set = 1;
            goto apply;
        case 0x0a:                                        /* remember_state */
            if (depth == STATE_STACK)
                return -1;
            saved_cfa[depth] = row->cfa;
            __builtin_memcpy(saved_reg[depth], row->reg, sizeof row->reg);
            depth++;
            continue;
        case 0x0b:                                        /* restore_state */
            if (depth == 0)
                return -1;
            depth--;
            /* DWARF: the CFA is restored too (GCC and LLVM emit it so) */
            row->cfa = saved_cfa[depth];
            __builtin_memcpy(row->reg, saved_reg[depth], sizeof row->reg);
            continue;
        case 0x0c:                                        /* def_cfa */
            reg = cur_uleb(&c);
            off = (int64_t)cur_uleb(&c);
            goto def_cfa;
        case 0x0d:                                        /* def_cfa_register */
            reg = cur_uleb(&c);
            if (row->cfa.how != HT_RULE_CFA_REG)
                return -1;
            off = row->cfa.off;
            goto def_cfa;
        case 0x0e:                                        /* def_cfa_offset */
            if (row->cfa.how != HT_RULE_CFA_REG)
                return -1;
            reg = row->cfa.reg;
            off = (int64_t)cur_uleb(&c);
            goto def_cfa;
        case 0x0f: {                                      /* def_cfa_expression */
            uint64_t len = cur_uleb(&c);
            if (!cur_has(&c, len) || len > 0xffff)
                return -1;
            row->cfa.how = HT_RULE_VAL_EXPR;
            row->cfa.expr = c.p;
            row->cfa.exprlen = (uint16_t)len;
            c.p += len;
            continue;
        }
        case 0x10: case 0x16: {                           /* expression, val_expression */
            reg = cur_uleb(&c);
            uint64_t len = cur_uleb(&c);
            if (!cur_has(&c, len) || len > 0xffff)
                return -1;
            rule.how = op == 0x10 ? HT_RULE_EXPR : HT_RULE_VAL_EXPR;
            rule.expr = c.p;
            rule.exprlen = (uint16_t)len;
            c.p += len;
            set = 1;
            goto apply_noff;
        }
        case 0x11:                                        /* offset_extended_sf */
            reg = cur_uleb(&c);
            off = cur_sleb(&c) * cie->data_align;
            rule.how = HT_RULE_OFFSET; set = 1;
            goto apply;
        case 0x12:                                        /* def_cfa_sf */
            reg = cur_uleb(&c);
            off = cur_sleb(&c) * cie->data_align;
            goto def_cfa;
        case 0x13:                                        /* def_cfa_offset_sf */
            if (row->cfa.how != HT_RULE_CFA_REG)
                return -1;
            reg = row->cfa.reg;
            off = cur_sleb(&c) * cie->data_align;
            goto def_cfa;
        case 0x14:                                        /* val_offset */
            reg = cur_uleb(&c);
            off = (int64_t)cur_uleb(&c) * cie->data_align;
            rule.how = HT_RULE_VAL_OFFSET; set = 1;
            goto apply;
        case 0x15:                                        /* val_offset_sf */
            reg = cur_uleb(&c);
            off = cur_sleb(&c) * cie->data_align;
            rule.how = HT_RULE_VAL_OFFSET; set = 1;
            goto apply;
        case 0x2e: cur_uleb(&c); continue;                /* GNU_args_size */
        case 0x2f:                                        /* GNU_negative_offset_extended */
            reg = cur_uleb(&c);
            off = -(int64_t)cur_uleb(&c) * cie->data_align;
            rule.how = HT_RULE_OFFSET; set = 1;
            goto apply;
        default:
            return -1;
        }

    advance:
        if (c.bad)
            return -1;
        if (*loc + adv * cie->code_align > pc)
            return 0;
        *loc += adv * cie->code_align;
        continue;
    restore:
        if (c.bad)
            return -1;
        if (reg < HT_DW_NREGS) {
            if (!init)
                return -1;  /* DW_CFA_restore inside a CIE */
            row->reg[reg] = init->reg[reg];
        }
        continue;
    def_cfa:
        if (c.bad || reg >= HT_DW_NREGS || off != (int32_t)off)
            return -1;
        row->cfa.how = HT_RULE_CFA_REG;
        row->cfa.reg = (uint8_t)reg;
        row->cfa.off = (int32_t)off;
        row->cfa.expr = NULL;
        continue;
    apply:
        if (off != (int32_t)off)
            return -1;
        rule.off = (int32_t)off;
    apply_noff:
        if (c.bad)
            return -1;
        if (set && reg < HT_DW_NREGS)   /* vector registers: not ours */
            row->reg[reg] = rule;
        continue;
    }
    return c.bad ? -1 : 0;
}

/* Runs the CIE's and the FDE's programs up to pc. */
static int fde_row(const fde_t *fp, const uint8_t *lo, const uint8_t *hi, uintptr_t pc,
                   ht_cfi_row_t *row)
{
    fde_t f = *fp;
    if (f.cie.ra_reg != HT_DW_RA)
        return HT_CFI_BAD;
    __builtin_memset(row, 0, sizeof *row);
    row->cfa.how = HT_RULE_CFA_REG;   /* until the CIE says otherwise */
    row->cfa.reg = HT_DW_RSP;
    row->cfa.off = 8;
    uintptr_t loc = f.pc_begin;
    if (run_program(f.cie.insns, f.cie.insns_end, &f.cie, lo, hi, &loc, UINTPTR_MAX, row, NULL))
        return HT_CFI_BAD;
    ht_cfi_row_t init = *row;
    loc = f.pc_begin;
    if (run_program(f.insns, f.insns_end, &f.cie, lo, hi, &loc, pc, row, &init))
        return HT_CFI_BAD;
    row->signal_frame = f.cie.signal_frame;
    row->pc_begin = f.pc_begin;
    row->pc_end = f.pc_end;
    return HT_CFI_OK;
}

int ht__cfi_row(const ht_module_t *m, uintptr_t pc, ht_cfi_row_t *row)
{
    if (!m->eh_hdr)
        return HT_CFI_NONE;
    fde_t f;
    int r = find_fde(m, pc, &f);
    if (r != HT_CFI_OK)
        return r;
    return fde_row(&f, (const uint8_t *)m->rd_lo, (const uint8_t *)m->rd_hi, pc, row);
}

size_t ht__eh_frame_length(const uint8_t *eh, size_t max)
{
    size_t at = 0;
    while (at + 4 <= max) {
        uint32_t len;
        __builtin_memcpy(&len, eh + at, 4);
        if (len == 0)
            return at + 4;
        if (len == 0xffffffffu || len > max - at - 4)
            return 0;
        at += 4 + (size_t)len;
    }
    return 0;
}

int ht__eh_frame_each(const uint8_t *eh, size_t size, intptr_t bias,
                      void (*fn)(void *, uintptr_t, uintptr_t), void *ctx)
{
    const uint8_t *hi = eh + size;
    fde_t f;
    for (const uint8_t *p = eh, *next; p < hi; p = next) {
        int r = parse_fde(p, eh, hi, bias, &f, &next);
        if (r < 0 || next <= p)
            return -1;
        if (r == 1 && next == p + 4)
            break;
        if (r == 0 && f.pc_end > f.pc_begin)
            fn(ctx, f.pc_begin, f.pc_end);
    }
    return 0;
}

int ht__cfi_row_eh(const uint8_t *eh, size_t size, intptr_t bias, uintptr_t pc, ht_cfi_row_t *row)
{
    fde_t f;
    int r = scan_eh_frame(eh, eh, eh + size, bias, pc, &f);
    if (r != HT_CFI_OK)
        return r;
    return fde_row(&f, eh, eh + size, pc, row);
}

/* ---- DWARF expressions ------------------------------------------------ */

#define EVAL_STACK 16

int ht__dw_eval(const uint8_t *expr, size_t len, const ht_regs_t *regs, int push_cfa,
                uintptr_t cfa, ht_read_fn rd, void *ctx, uintptr_t *out)
{
    uintptr_t st[EVAL_STACK];
    int sp = 0;
    cursor_t c = { expr, expr, expr + len, 0, 0 };
    unsigned steps = 0;
#define PUSH(v) do { uintptr_t v_ = (v); if (sp == EVAL_STACK) return 0; st[sp++] = v_; } while (0)
#define NEED(k) do { if (sp < (k)) return 0; } while (0)
    if (push_cfa)
        PUSH(cfa);
    while (c.p < c.end) {
        if (++steps > 1000)             /* loops through DW_OP_bra/skip */
            return 0;
        uint8_t op = *c.p++;
        if (op >= 0x30 && op <= 0x4f) {           /* lit0..31 */
            PUSH((uintptr_t)(op - 0x30));
            continue;
        }
        if (op >= 0x70 && op <= 0x8f) {           /* breg0..31 */
            unsigned r = op - 0x70;
            int64_t o = cur_sleb(&c);
            if (c.bad || r >= HT_DW_NREGS || !(regs->valid & (1u << r)))
                return 0;
            PUSH(regs->r[r] + (uintptr_t)o);
            continue;
        }
        uintptr_t a, b;
        switch (op) {
        case 0x03: PUSH((uintptr_t)cur_fixed(&c, 8)); break;                /* addr */
        case 0x06:                                                          /* deref */
            NEED(1);
            if (!rd(ctx, st[sp - 1], &st[sp - 1]))
                return 0;
            break;
        case 0x08: PUSH((uintptr_t)cur_fixed(&c, 1)); break;
        case 0x09: PUSH((uintptr_t)(int64_t)(int8_t)cur_fixed(&c, 1)); break;
        case 0x0a: PUSH((uintptr_t)cur_fixed(&c, 2)); break;
        case 0x0b: PUSH((uintptr_t)(int64_t)(int16_t)cur_fixed(&c, 2)); break;
        case 0x0c: PUSH((uintptr_t)cur_fixed(&c, 4)); break;
        case 0x0d: PUSH((uintptr_t)(int64_t)(int32_t)cur_fixed(&c, 4)); break;
        case 0x0e: case 0x0f: PUSH((uintptr_t)cur_fixed(&c, 8)); break;
        case 0x10: PUSH((uintptr_t)cur_uleb(&c)); break;
        case 0x11: PUSH((uintptr_t)cur_sleb(&c)); break;
        case 0x12: NEED(1); PUSH(st[sp - 1]); break;                        /* dup */
        case 0x13: NEED(1); sp--; break;                                    /* drop */
        case 0x14: NEED(2); PUSH(st[sp - 2]); break;                        /* over */
        case 0x15: {                                                        /* pick */
            unsigned k = (unsigned)cur_fixed(&c, 1);
            NEED((int)k + 1);
            PUSH(st[sp - 1 - (int)k]);
            break;
        }
        case 0x16: NEED(2); a = st[sp - 1]; st[sp - 1] = st[sp - 2]; st[sp - 2] = a; break;
        case 0x17:                                                          /* rot */
            NEED(3);
            a = st[sp - 1];
            st[sp - 1] = st[sp - 2];
            st[sp - 2] = st[sp - 3];
            st[sp - 3] = a;
            break;
        case 0x19: NEED(1); if ((intptr_t)st[sp - 1] < 0) st[sp - 1] = -st[sp - 1]; break;
        case 0x1f: NEED(1); st[sp - 1] = -st[sp - 1]; break;                /* neg */
        case 0x20: NEED(1); st[sp - 1] = ~st[sp - 1]; break;                /* not */
        case 0x23: NEED(1); st[sp - 1] += (uintptr_t)cur_uleb(&c); break;   /* plus_uconst */
        case 0x1a: case 0x1b: case 0x1c: case 0x1d: case 0x1e: case 0x21: case 0x22:
        case 0x24: case 0x25: case 0x26: case 0x27: case 0x29: case 0x2a: case 0x2b:
        case 0x2c: case 0x2d: case 0x2e:
            NEED(2);
            b = st[--sp];
            a = st[sp - 1];
            switch (op) {
            case 0x1a: a &= b; break;
            case 0x1b: if (!b) return 0; a = (uintptr_t)((intptr_t)a / (intptr_t)b); break;
            case 0x1c: a -= b; break;
            case 0x1d: if (!b) return 0; a %= b; break;
            case 0x1e: a *= b; break;
            case 0x21: a |= b; break;
            case 0x22: a += b; break;
            case 0x24: a = b >= 64 ? 0 : a << b; break;
            case 0x25: a = b >= 64 ? 0 : a >> b; break;
            case 0x26: a = (uintptr_t)((intptr_t)a >> (b >= 64 ? 63 : b)); break;
            case 0x27: a ^= b; break;
            case 0x29: a = a == b; break;
            case 0x2a: a = (intptr_t)a >= (intptr_t)b; break;
            case 0x2b: a = (intptr_t)a > (intptr_t)b; break;
            case 0x2c: a = (intptr_t)a <= (intptr_t)b; break;
            case 0x2d: a = (intptr_t)a < (intptr_t)b; break;
            case 0x2e: a = a != b; break;
            }
            st[sp - 1] = a;
            break;
        case 0x28: case 0x2f: {                                             /* bra, skip */
            int16_t d = (int16_t)cur_fixed(&c, 2);
            if (c.bad)
                return 0;
            int take = 1;
            if (op == 0x28) {
                NEED(1);
                take = st[--sp] != 0;
            }
            if (take) {
                const uint8_t *t = c.p + d;
                if (t < expr || t > c.end)
                    return 0;
                c.p = t;
            }
            break;
        }
        case 0x92: {                                                        /* bregx */
            uint64_t r = cur_uleb(&c);
            int64_t o = cur_sleb(&c);
            if (c.bad || r >= HT_DW_NREGS || !(regs->valid & (1u << r)))
                return 0;
            PUSH(regs->r[r] + (uintptr_t)o);
            break;
        }
        case 0x94: {                                                        /* deref_size */
            unsigned n = (unsigned)cur_fixed(&c, 1);
            NEED(1);
            uintptr_t addr = st[sp - 1], w;
            if (n == 0 || n > 8 || !rd(ctx, addr & ~(uintptr_t)7, &w))
                return 0;
            unsigned sh = (unsigned)(addr & 7) * 8;
            if ((addr & 7) + n > 8)
                return 0;
            w >>= sh;
            st[sp - 1] = n == 8 ? w : (w & (((uintptr_t)1 << (n * 8)) - 1));
            break;
        }
        case 0x96: break;                                                   /* nop */
        default:
            return 0;   /* register locations, pieces, TLS, calls: not in CFI */
        }
        if (c.bad)
            return 0;
    }
#undef PUSH
#undef NEED
    if (sp < 1)
        return 0;
    *out = st[sp - 1];
    return 1;
}

int ht__cfi_apply(const ht_cfi_row_t *row, const ht_regs_t *in, ht_regs_t *out,
                  ht_read_fn rd, void *ctx, int *outermost)
{
    uintptr_t cfa;
    *outermost = 0;
    if (row->cfa.how == HT_RULE_CFA_REG) {
        if (!(in->valid & (1u << row->cfa.reg)))
            return 0;
        cfa = in->r[row->cfa.reg] + (uintptr_t)(intptr_t)row->cfa.off;
    } else if (!ht__dw_eval(row->cfa.expr, row->cfa.exprlen, in, 0, 0, rd, ctx, &cfa)) {
        return 0;
    }
    /* callee-saved registers survive the call; the others are unknown */
    const uint32_t callee_saved = (1u << HT_DW_RBX) | (1u << HT_DW_RBP) |
                                  (0xfu << 12) /* r12-r15 */;
    out->valid = in->valid & callee_saved;
    for (int r = 0; r < HT_DW_NREGS; r++) {
        const ht_cfi_rule_t *ru = &row->reg[r];
        uintptr_t v, addr;
        switch (ru->how) {
        case HT_RULE_SAME:
            if (r == HT_DW_RA) {        /* no rule for the RA column */
                *outermost = 1;
                return 1;
            }
            out->r[r] = in->r[r];
            continue;
        case HT_RULE_UNDEFINED:
            out->valid &= ~(1u << r);
            if (r == HT_DW_RA) {
                *outermost = 1;
                return 1;
            }
            continue;
        case HT_RULE_OFFSET:
            if (!rd(ctx, cfa + (uintptr_t)(intptr_t)ru->off, &v))
                goto fail;
            break;
        case HT_RULE_VAL_OFFSET:
            v = cfa + (uintptr_t)(intptr_t)ru->off;
            break;
        case HT_RULE_REGISTER:
            if (!(in->valid & (1u << ru->reg)))
                goto fail;
            v = in->r[ru->reg];
            break;
        case HT_RULE_EXPR:
            if (!ht__dw_eval(ru->expr, ru->exprlen, in, 1, cfa, rd, ctx, &addr) ||
                !rd(ctx, addr, &v))
                goto fail;
            break;
        case HT_RULE_VAL_EXPR:
            if (!ht__dw_eval(ru->expr, ru->exprlen, in, 1, cfa, rd, ctx, &v))
                goto fail;
            break;
        default:
            goto fail;
        }
        out->r[r] = v;
        out->valid |= 1u << r;
        continue;
    fail:
        if (r == HT_DW_RA)
            return 0;
        out->valid &= ~(1u << r);     /* an unreadable save slot: value unknown */
    }
    if (!(row->reg[HT_DW_RSP].how == HT_RULE_SAME)) {
        /* an explicit rule for rsp is unusual; honour it if it gave a value */
        if (!(out->valid & (1u << HT_DW_RSP)))
            out->r[HT_DW_RSP] = cfa;
    } else {
        out->r[HT_DW_RSP] = cfa;
    }
    out->valid |= 1u << HT_DW_RSP;
    return 1;
}
