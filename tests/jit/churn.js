// churn.js -- tests/agent/leakcheck.sh: node compressing for a while
// (zlib's native blocks made and freed under V8, its heap marked
// MADV_DONTFORK), then "churn ok". Nothing it allocates is ever
// unreachable while it runs.
const zlib = require('zlib');
const end = Date.now() + (Number(process.argv[2]) || 2000);
const keep = [];
function tick() {
    for (let i = 0; i < 50; i++) {
        keep.push(zlib.deflateSync(Buffer.alloc(10000, i)));
        if (keep.length > 500)
            keep.shift();
    }
    if (Date.now() < end)
        setImmediate(tick);
    else
        console.log("churn ok");
}
tick();
