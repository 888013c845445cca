/* render_html.c -- one self-contained HTML file (inline CSS and JS, no
 * network): a summary, a memory-over-time chart (SVG, drawn here), a
 * zoomable flame graph (drawn by the inline script from JSON data), and
 * the top rows as a table.
 *
 * Everything that comes from the trace is escaped: HTML text through
 * html_text() (& < > " '), JSON through ht__json_string() (which also
 * escapes < > &, so "</script>" in a function name cannot end the data
 * element), and the script only ever sets textContent, never innerHTML. */
#include <stdlib.h>
#include <string.h>
#include "model.h"


static void html_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: putc(*s, f);
        }
    }
}

static const char *css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}"
    ".summary{font-size:16px;font-weight:600}.sub{color:#666}"
    ".warn{background:#fff3cd;border-left:4px solid #d39e00;padding:4px 8px}.note{color:#555}"
    "#flame{position:relative;width:100%;overflow:hidden;border:1px solid #ddd;font:12px monospace}"
    "#flame div{position:absolute;height:17px;line-height:17px;overflow:hidden;white-space:nowrap;"
    "box-sizing:border-box;border:1px solid #fff;padding:0 3px;cursor:pointer;border-radius:2px}"
    "#flame div:hover{border-color:#333}"
    "#flamebar{margin:4px 0}#flamebar button{font-size:12px}#flameinfo{margin-left:12px;color:#444}"
    "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #eee;"
    "text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "details ol{margin:4px 0;padding-left:20px;font:12px monospace}.inl{color:#888}"
    "svg text{font:11px sans-serif;fill:#555}";

/* The flame graph: builds a tree from data.stacks ([value, name index...],
 * outermost first), lays it out as an icicle (root on top), and zooms into
 * a node on click (its ancestors stay, full width). A link ending in
 * #focus=NAME opens zoomed into the first frame called NAME. */
static const char *script =
    "(function(){\n"
    "var d=JSON.parse(document.getElementById('data').textContent);\n"
    "var root={n:d.root,v:0,c:new Map(),p:null};\n"
    "d.stacks.forEach(function(s){var node=root;root.v+=s[0];\n"
    " for(var i=1;i<s.length;i++){var k=s[i],ch=node.c.get(k);\n"
    "  if(!ch){ch={n:d.names[k],v:0,c:new Map(),p:node};node.c.set(k,ch);}\n"
    "  ch.v+=s[0];node=ch;}});\n"
    "var box=document.getElementById('flame'),info=document.getElementById('flameinfo');\n"
    "var H=18;\n"
    "function color(name){var h=0;for(var i=0;i<name.length;i++)h=(h*31+name.charCodeAt(i))|0;\n"
    " return 'hsl('+(10+Math.abs(h)%40)+','+(60+Math.abs(h>>8)%30)+'%,'+(55+Math.abs(h>>16)%15)+'%)';}\n"
    "function fmt(v){return v.toLocaleString('en-US')+' bytes';}\n"
    "function draw(focus){box.textContent='';var maxd=0;\n"
    " var anc=[];for(var a=focus;a;a=a.p)anc.unshift(a);\n"
    " function el(node,depth,x,w){if(w<0.0015)return;if(depth>maxd)maxd=depth;\n"
    "  var e=document.createElement('div');e.className='fn';\n"
    "  e.style.left=(x*100)+'%';e.style.width=(w*100)+'%';e.style.top=(depth*H)+'px';\n"
    "  e.style.background=node===root?'#ccc':color(node.n);\n"
    "  var pct=root.v?(100*node.v/root.v).toFixed(1):'0';\n"
    "  e.textContent=node.n;e.title=node.n+'\\n'+fmt(node.v)+' ('+pct+'%)';\n"
    "  e.addEventListener('click',function(){draw(node);});\n"
    "  e.addEventListener('mouseenter',function(){info.textContent=node.n+': '+fmt(node.v)+' ('+pct+'%)';});\n"
    "  box.appendChild(e);return e;}\n"
    " for(var i=0;i<anc.length-1;i++)el(anc[i],i,0,1);\n"
    " function sub(node,depth,x,w){el(node,depth,x,w);var kids=Array.from(node.c.values());\n"
    "  kids.sort(function(a,b){return b.v-a.v;});var cx=x;\n"
    "  kids.forEach(function(k){var kw=node.v?w*k.v/node.v:0;sub(k,depth+1,cx,kw);cx+=kw;});}\n"
    " sub(focus,anc.length-1,0,1);box.style.height=((maxd+1)*H+2)+'px';\n"
    " document.getElementById('flamereset').disabled=focus===root;}\n"
    "document.getElementById('flamereset').addEventListener('click',function(){draw(root);});\n"
    "function find(node,name){if(node.n===name&&node!==root)return node;\n"
    " for(var k of node.c.values()){var r=find(k,name);if(r)return r;}return null;}\n"
    "function fromHash(){var h=decodeURIComponent(location.hash.slice(1));var f=root;\n"
    " if(h.indexOf('focus=')===0){f=find(root,h.slice(6))||root;}\n"
    " draw(f);document.body.setAttribute('data-focus',f===root?'':f.n);\n"
    " document.body.setAttribute('data-flame-nodes',String(box.childNodes.length));}\n"
    "window.addEventListener('hashchange',fromHash);fromHash();\n"
    "})();\n";

static void chart(FILE *f, const ht_trace_t *t)
{
    const double W = 900, H = 200, L = 70, B = 24;
    uint64_t max = 1, t0 = t->nsnaps ? t->snaps[0].time_ns : 0;
    uint64_t t1 = t->nsnaps ? t->snaps[t->nsnaps - 1].time_ns : 0;
    for (size_t i = 0; i < t->nsnaps; i++)
        if (t->snaps[i].live_bytes > max)
            max = t->snaps[i].live_bytes;
    /* the peak, when the last snapshot says when it was: a point of its
     * own on the line (snapshots rarely fall on it) */
    const ht_tsnapshot_t *last = t->nsnaps ? &t->snaps[t->nsnaps - 1] : NULL;
    int peak = last && last->has_peak && last->peak_ns;
    if (peak) {
        if (last->peak_bytes > max)
            max = last->peak_bytes;
        if (last->peak_ns < t0)
            t0 = last->peak_ns;
    }
    size_t at_peak = 0;         /* the peak goes before snapshot at_peak */
    while (peak && at_peak < t->nsnaps && t->snaps[at_peak].time_ns < last->peak_ns)
        at_peak++;
    double span = t1 > t0 ? (double)(t1 - t0) : 1;
    double px = L + (t1 > t0 ? W * (double)(peak ? last->peak_ns - t0 : 0) / span : W / 2);
    double py = H - H * 0.95 * (double)(peak ? last->peak_bytes : 0) / (double)max;
    fprintf(f, "<svg id=\"chart\" width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"live bytes over time\">\n",
            W + L + 12, H + B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"0\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#999\"/>"
               "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#999\"/>\n",
            L, L, H, L, H, L + W, H);
    char hb[32];
    fprintf(f, "<text x=\"%.0f\" y=\"12\" text-anchor=\"end\">%s</text>", L - 4, ht__human_bytes(max, hb));
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>", L - 4, H);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%.3f s</text>", L, H + 16, (double)t0 / 1e9);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.3f s</text>\n", L + W, H + 16,
            (double)t1 / 1e9);
    fputs("<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"", f);
    for (size_t i = 0; i <= t->nsnaps; i++) {
        if (peak && i == at_peak)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", px, py);
        if (i == t->nsnaps)
            break;
        double x = L + (t1 > t0 ? W * (double)(t->snaps[i].time_ns - t0) / span : W / 2);
        double y = H - H * 0.95 * (double)t->snaps[i].live_bytes / (double)max;
        fprintf(f, "%s%.1f,%.1f", i || (peak && at_peak == 0) ? " " : "", x, y);
    }
    fputs("\"/>\n", f);
    if (peak)
        fprintf(f, "<rect id=\"peak\" x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"#8e44ad\" "
                   "transform=\"rotate(45 %.1f %.1f)\"><title>the peak: %llu bytes (heap and mappings) at %.3f s "
                   "(heaptrail report --peak)</title></rect>\n",
                px - 4, py - 4, px, py, (unsigned long long)last->peak_bytes, (double)last->peak_ns / 1e9);
    for (size_t i = 0; i < t->nsnaps; i++) {
        double x = L + (t1 > t0 ? W * (double)(t->snaps[i].time_ns - t0) / span : W / 2);
        double y = H - H * 0.95 * (double)t->snaps[i].live_bytes / (double)max;
        fprintf(f, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#c0392b\"><title>snapshot %u (%s) at %.3f s: %llu bytes in %llu %s</title></circle>\n",
                x, y, t->snaps[i].seq, ht__snap_reason(t->snaps[i].reason),
                (double)t->snaps[i].time_ns / 1e9, (unsigned long long)t->snaps[i].live_bytes,
                (unsigned long long)t->snaps[i].live_blocks,
                ht__plural((int64_t)t->snaps[i].live_blocks, "block", "blocks"));
    }
    fputs("</svg>\n", f);
}

static const char *frame_name(const ht_report_t *r, const ht_rframe_t *fr)
{
    return fr->sf && fr->sf->function ? fr->sf->function : ht__frame_fallback(r, fr);
}

/* data: {"root": label, "names": [...], "stacks": [[bytes, name idx...]]} */
static void flame_data(const ht_report_t *r, FILE *f)
{
    ht_pool_t names = { 0 };
    ht_rframe_t *buf = NULL;
    size_t cap = 0, drawn = 0;
    int64_t other = 0;
    const char *root = r->type == HT_REPORT_DIFF ? "growth" : r->type == HT_REPORT_GROWTH
                       ? "growth" : r->type == HT_REPORT_LEAKS ? "leaked"
                       : r->type == HT_REPORT_ALLOCATED ? "allocated"
                       : r->type == HT_REPORT_TEMPORARY ? "temporary allocations"
                       : r->type == HT_REPORT_PEAK ? "at the peak" : "in use";
    fputs("<script type=\"application/json\" id=\"data\">{\"root\":", f);
    ht__json_string(f, root);
    fputs(",\"stacks\":[", f);
    ht_progress_t pr;
    ht__progress_init(&pr, r->ses, "drawing the flame graph");
    for (size_t i = 0; i < r->nrows; i++) {
        const ht_row_t *row = &r->rows[i];
        ht__progress_step(&pr, i, r->nrows);
        int64_t w = ht__row_weight(r, row);
        if (w <= 0)
            continue;
        if (drawn >= HT_HTML_FLAME_ROWS) {
            other += w;
            continue;
        }
        size_t n = ht__row_frames(r, row, &buf, &cap);
        fprintf(f, "%s[%lld", drawn++ ? ",\n" : "\n", (long long)w);
        uint32_t idx;
        if (r->by == HT_BY_MODULE) {
            const char *s = strrchr(row->label, '/');
            s = s ? s + 1 : row->label;
            ht__pool_intern(&names, s, strlen(s), &idx);
            fprintf(f, ",%u", idx);
        } else if (!n) {
            ht__pool_intern(&names, "[no stack]", 10, &idx);
            fprintf(f, ",%u", idx);
        }
        for (size_t k = n; k-- > 0;) {
            const char *nm = frame_name(r, &buf[k]);
            ht__pool_intern(&names, nm, strlen(nm), &idx);
            fprintf(f, ",%u", idx);
        }
        fputc(']', f);
    }
    other += r->type == HT_REPORT_TEMPORARY ? r->rest_blocks : r->rest_bytes;
    ht__progress_end(&pr);
    if (other) {
        uint32_t idx;
        ht__pool_intern(&names, "[other stacks]", 14, &idx);
        fprintf(f, "%s[%lld,%u]", drawn ? ",\n" : "\n", (long long)other, idx);
    }
    fputs("],\"names\":[", f);
    for (size_t i = 0; i < names.n; i++) {
        if (i)
            fputc(',', f);
        ht__json_string(f, names.strs[i]);
    }
    fputs("]}</script>\n", f);
    ht__pool_free(&names);
    free(buf);
}

static void summary(const ht_report_t *r, FILE *f)
{
    size_t nst = r->stack_count;
    fputs("<p class=\"summary\" id=\"summary\">", f);
    switch (r->type) {
    case HT_REPORT_LEAKS:
    case HT_REPORT_INUSE:
    case HT_REPORT_ALLOCATED:
    case HT_REPORT_PEAK:
    case HT_REPORT_TEMPORARY:
        {
            char line[512];
            html_text(f, ht__totals_line(r, line, sizeof line));
        }
        break;
    case HT_REPORT_DIFF: {
        char cl[256];
        fprintf(f, "%+lld bytes, %+lld %s %sbetween the snapshots (%lld bytes before, %lld after)",
                (long long)r->total_bytes, (long long)r->total_blocks,
                ht__plural(r->total_blocks, "block", "blocks"), r->peak ? "at the peak " : "",
                (long long)r->total_a_bytes, (long long)r->total_b_bytes);
        html_text(f, ht__custom_change(r, cl, sizeof cl));
        break;
    }
    case HT_REPORT_GROWTH: {
        char cl[256];
        size_t ns = nst - r->custom_sites;  /* custom stacks are counted in their clause */
        fprintf(f, "%zu %s grew, by %lld bytes in %lld %s together, over %u snapshots", ns,
                ht__plural((int64_t)ns, "stack", "stacks"), (long long)r->total_bytes,
                (long long)r->total_blocks, ht__plural(r->total_blocks, "block", "blocks"), r->nsnaps);
        html_text(f, ht__custom_change(r, cl, sizeof cl));
        break;
    }
    }
    fputs("</p>\n", f);
    char line[1024];
    if (ht__reach_summary(r, line, sizeof line)) {
        fputs("<p id=\"reach\">", f);
        html_text(f, line);
        fputs("</p>\n", f);
    }
    char sl[256];
    if (ht__supp_line(r, sl, sizeof sl)) {
        fputs("<p id=\"suppressed\" class=\"note\">", f);
        html_text(f, sl);
        fputs(" (--suppressions)</p>\n", f);
    }
    int warn;
    char fw[640];
    if (ht__foreign_text(r->ses->in[r->input_b].t, &warn, fw, sizeof fw)) {
        fprintf(f, "<p id=\"foreign\" class=\"%s\">%s: ", warn ? "warn" : "note", warn ? "Warning" : "Note");
        html_text(f, fw);
        fputs("</p>\n", f);
    }
    if (ht__sample_text(r->ses->in[r->input_b].t, fw, sizeof fw)) {
        fputs("<p id=\"sampled\" class=\"note\">Note: ", f);
        html_text(f, fw);
        fputs("</p>\n", f);
    }
    fputs("<p class=\"sub\">", f);
    html_text(f, r->ses->in[r->input_b].name);
    fprintf(f, ", snapshot %u (%s) at %.3f s</p>\n", r->snap_b->seq,
            ht__snap_reason(r->snap_b->reason), (double)r->snap_b->time_ns / 1e9);
}

/* One part of a lost cell's tooltip: "definitely lost: 2000 bytes in 2
 * blocks", a diff's "definitely lost: +1000 bytes, +1 block". */
static void lost_part(FILE *f, int diff, const char *what, int64_t bytes, int64_t blocks)
{
    if (diff)
        fprintf(f, "%s: %+lld bytes, %+lld %s", what, (long long)bytes, (long long)blocks,
                ht__plural(blocks, "block", "blocks"));
    else
        fprintf(f, "%s: %lld bytes in %lld %s", what, (long long)bytes, (long long)blocks,
                ht__plural(blocks, "block", "blocks"));
}

/* A row's unreachable cell: its value, definitely + indirectly lost bytes
 * (a diff's: their change), and in its tooltip the split, with possibly
 * lost after it when the check counted those. */
static void lost_cell(const ht_report_t *r, const ht_rowlost_t *l, FILE *f)
{
    int diff = r->type == HT_REPORT_DIFF;
    fputs("<td class=\"n lost\" title=\"", f);
    lost_part(f, diff, "definitely lost", l->lost_bytes, l->lost_blocks);
    fputs("; ", f);
    lost_part(f, diff, "indirectly lost", l->ilost_bytes, l->ilost_blocks);
    if (r->possible) {
        fputs("; ", f);
        lost_part(f, diff, "possibly lost", l->plost_bytes, l->plost_blocks);
    }
    fprintf(f, diff ? "\">%+lld</td>" : "\">%lld</td>", (long long)(l->lost_bytes + l->ilost_bytes));
}

static void table(const ht_report_t *r, FILE *f)
{
    ht_rframe_t *buf = NULL;
    size_t cap = 0;
    /* with reachability, one more column: the row's unreachable bytes
     * (definitely + indirectly lost; the split, and possibly lost when
     * counted, in its tooltip); a diff's: their change, after minus before */
    int diff = r->type == HT_REPORT_DIFF;
    int temp = r->type == HT_REPORT_TEMPORARY;
    fprintf(f, "<table id=\"sites\"><thead><tr><th>#</th><th>%s</th><th>%s</th><th>%%</th>%s"
               "<th>where</th><th>module</th></tr></thead><tbody>\n",
            temp ? "temporary bytes" : "bytes", temp ? "temporary allocations" : "blocks",
            !r->losts ? ""
            : diff ? "<th title=\"change in definitely lost + indirectly lost, after - before\">"
                     "unreachable bytes (change)</th>"
                   : "<th title=\"definitely lost + indirectly lost\">unreachable bytes</th>");
    for (size_t i = 0; i < r->nshown; i++) {
        const ht_row_t *row = &r->rows[i];
        size_t n = ht__row_frames(r, row, &buf, &cap);
        /* the row's headline: its origin frame (first outside well-tested code) */
        size_t o = 0;
        while (o < n && buf[o].mod != HT_NOMOD && ht__sym_mod(r->ses->sym, buf[o].mod)->well_tested)
            o++;
        if (o == n)
            o = 0;
        fprintf(f, "<tr><td class=\"n\">%zu</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
                   "<td class=\"n\">%.1f</td>", i + 1, (long long)row->bytes, (long long)row->blocks,
                ht__row_share(r, row));
        /* custom allocator blocks: verdicts when the check judged them */
        if (ht__row_judged(r, row))
            lost_cell(r, row->lost, f);
        else if (row->lost && row->kind == HT_KIND_MMAP)
            fputs("<td class=\"n lost\" title=\"mmap regions are not checked\"></td>", f);
        else if (row->lost)
            fputs("<td class=\"n lost\" title=\"custom allocator blocks are not checked\"></td>", f);
        fputs("<td>", f);
        const char *head = r->by == HT_BY_MODULE ? row->label : n ? frame_name(r, &buf[o]) : "[no stack]";
        fputs("<details><summary>", f);
        html_text(f, head);
        if (n && buf[o].sf && buf[o].sf->file) {
            const char *b = strrchr(buf[o].sf->file, '/');
            fputs(" <span class=\"sub\">", f);
            html_text(f, b ? b + 1 : buf[o].sf->file);
            fprintf(f, ":%u</span>", buf[o].sf->line);
        }
        fputs("</summary><ol>", f);
        for (size_t k = 0; k < n; k++) {
            fputs(buf[k].sf && buf[k].sf->inlined ? "<li class=\"inl\">" : "<li>", f);
            html_text(f, frame_name(r, &buf[k]));
            if (buf[k].sf && buf[k].sf->inlined)
                fputs(" [inlined]", f);
            if (buf[k].sf && buf[k].sf->file) {
                fputs(" &mdash; ", f);
                html_text(f, buf[k].sf->file);
                fprintf(f, ":%u", buf[k].sf->line);
            }
            fputs("</li>", f);
        }
        fputs("</ol></details></td><td>", f);
        if (r->by == HT_BY_MODULE) {
            html_text(f, row->label);
        } else if (n && buf[o].mod != HT_NOMOD) {
            html_text(f, ht__sym_mod(r->ses->sym, buf[o].mod)->name);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    free(buf);
}

int ht__render_html(const ht_report_t *r, FILE *f)
{
    const char *what = r->type == HT_REPORT_DIFF ? "diff" : r->type == HT_REPORT_GROWTH
                       ? "growth" : "report";
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n<title>heaptrail ", f);
    fputs(what, f);
    fputs(": ", f);
    html_text(f, r->ses->in[r->input_b].name);
    fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>heaptrail %s</h1>\n", css, what);
    summary(r, f);
    fputs("<h2>Memory over time</h2>\n", f);
    chart(f, r->timeline);
    fprintf(f, "<h2>Flame graph of %s</h2>\n",
            r->type == HT_REPORT_LEAKS ? "leaked bytes" : r->type == HT_REPORT_INUSE ? "in-use bytes"
            : r->type == HT_REPORT_ALLOCATED ? "allocated bytes" : r->type == HT_REPORT_PEAK ? "peak bytes"
            : r->type == HT_REPORT_TEMPORARY ? "temporary allocations" : "grown bytes");
    fputs("<div id=\"flamebar\"><button id=\"flamereset\" type=\"button\">Reset zoom</button>"
          "<span id=\"flameinfo\">click a frame to zoom</span></div>\n<div id=\"flame\"></div>\n", f);
    fprintf(f, "<h2>Top %s</h2>\n",
            r->by == HT_BY_FUNCTION ? "functions" : r->by == HT_BY_MODULE ? "modules" : "sites");
    table(r, f);
    flame_data(r, f);
    fprintf(f, "<script>%s</script>\n</body></html>\n", script);
    return ferror(f) ? -1 : 0;
}
