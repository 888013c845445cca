// check_pprof.mjs PROFILE.pb.gz REPORT.json BUILD_ID MODULE_SUFFIX
// Decodes a heaptrail pprof profile with the independent pprof-format
// package and checks it against the JSON report of the same command:
// sample types, one sample per site with values [blocks, bytes,
// alloc_blocks, alloc_bytes] and its kind label, each sample's frames (function, file, line,
// innermost first, inline frames expanded) and the module's mapping with
// its build-id. Exits 1 with a message on the first difference.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

const [file, jsonFile, buildId, modSuffix] = process.argv.slice(2);
const p = Profile.decode(gunzipSync(readFileSync(file)));
const rep = JSON.parse(readFileSync(jsonFile, 'utf8'));
const S = (i) => p.stringTable.strings[Number(i)];
let failures = 0;
function check(cond, what) {
  if (!cond) { failures++; console.error('FAIL: ' + what); }
}

const types = p.sampleType.map((t) => S(t.type) + '/' + S(t.unit)).join(',');
check(types === 'inuse_objects/count,inuse_space/bytes,alloc_objects/count,alloc_space/bytes',
      'sample types: ' + types);
check(S(p.defaultSampleType) === 'inuse_space', 'default sample type ' + S(p.defaultSampleType));
check(p.periodType && S(p.periodType.type) === 'space' && S(p.periodType.unit) === 'bytes', 'period type');
// a sampled trace: period is the mean spacing of the samples in bytes, and
// a comment says the values are estimates; 1 and no such comment otherwise
const interval = rep.sample_interval || 1;
check(Number(p.period) === interval, `period ${p.period} != ${interval}`);
const sampledNote = (p.comment || []).some((c) => S(c).startsWith('sampled trace'));
check(sampledNote === Boolean(rep.sample_interval), `sampled-trace comment ${sampledNote} for interval ${interval}`);
check(p.sample.length === rep.sites.length, `samples ${p.sample.length} != sites ${rep.sites.length}`);

const locs = new Map(p.location.map((l) => [Number(l.id), l]));
const funcs = new Map(p.function.map((f) => [Number(f.id), f]));
const maps = new Map(p.mapping.map((m) => [Number(m.id), m]));
rep.sites.forEach((site, i) => {
  const s = p.sample[i];
  if (!s) return;
  // int64 values: pprof-format hands back the unsigned varint (as a BigInt
  // when large); protobuf's int64 is its two's complement
  const v = s.value.map((x) => Number(BigInt.asIntN(64, BigInt(x))));
  const want = [site.blocks, site.bytes, site.alloc_blocks, site.alloc_bytes];
  check(JSON.stringify(v) === JSON.stringify(want), `sample ${i} values ${v} != ${want}`);
  // a mapping's or a custom allocator's sample carries the label kind=mmap
  // or kind=custom; a heap sample none
  const kinds = (s.label || []).filter((l) => S(l.key) === 'kind').map((l) => S(l.str));
  check(JSON.stringify(kinds) === JSON.stringify(site.kind === 'heap' ? [] : [site.kind]),
        `sample ${i} kind labels ${JSON.stringify(kinds)} for a site of kind ${site.kind}`);
  const frames = [];
  for (const id of s.locationId) {
    const loc = locs.get(Number(id));
    check(loc !== undefined, `sample ${i}: location ${id} missing`);
    if (!loc) continue;
    const m = maps.get(Number(loc.mappingId));
    for (const line of loc.line) {
      const f = funcs.get(Number(line.functionId));
      frames.push({ function: S(f.name), file: S(f.filename) || null, line: Number(line.line) || null,
                    module: m ? S(m.filename) : null });
    }
  }
  const wantFrames = site.frames.map((f) => ({ function: f.function, file: f.file, line: f.line, module: f.module }));
  check(JSON.stringify(frames) === JSON.stringify(wantFrames),
        `sample ${i} frames\n  got  ${JSON.stringify(frames)}\n  want ${JSON.stringify(wantFrames)}`);
});

const mod = p.mapping.find((m) => S(m.filename).endsWith(modSuffix));
check(mod !== undefined, 'no mapping for ' + modSuffix);
if (mod) {
  check(S(mod.buildId) === buildId, `build-id ${S(mod.buildId)} != ${buildId}`);
  check(mod.hasFunctions && mod.hasFilenames && mod.hasLineNumbers && mod.hasInlineFrames, 'mapping flags');
  check(Number(mod.memoryLimit) > Number(mod.memoryStart), 'mapping range');
  // every location of the mapping lies inside it
  for (const l of p.location)
    if (Number(l.mappingId) === Number(mod.id))
      check(Number(l.address) >= Number(mod.memoryStart) && Number(l.address) < Number(mod.memoryLimit),
            `location ${l.id} address outside its mapping`);
}
console.log(`${file}: ${p.sample.length} samples, ${p.location.length} locations, ` +
            `${p.function.length} functions, ${p.mapping.length} mappings checked; ${failures} failures`);
process.exit(failures ? 1 : 0);
