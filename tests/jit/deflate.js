// deflate.js -- native allocations under named JS functions, for
// tests/jit/node.sh: deflateA runs N_A times and deflateB N_B times, each
// compressing with zlib.deflateSync (native zlib, whose deflateInit2_
// allocates the same blocks every call).
'use strict';
const zlib = require('zlib');
const N_A = 300, N_B = 200;
function deflateA(i) { return zlib.deflateSync(Buffer.alloc(2048 + (i % 64), i & 255)).length; }
function deflateB(i) { return zlib.deflateSync(Buffer.alloc(4096 + (i % 64), i & 127)).length; }
let total = 0;
for (let i = 0; i < N_A; i++) total += deflateA(i);
for (let i = 0; i < N_B; i++) total += deflateB(i);
console.log(N_A, N_B, total > 0 ? 'ok' : 'bad');
