// Node.js under LD_PRELOAD=libebb.so (tests/real_programs.rs): worker threads, each
// building a Map of Buffers (their backing stores come from malloc), gzip round trips
// through zlib and SHA-256 through OpenSSL (libuv's thread pool for the async ones),
// results sent to the main thread; the main thread prints them in a fixed order, so the
// output is the same on any allocator.
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const zlib = require('zlib');
const crypto = require('crypto');

if (isMainThread) {
  const results = new Array(4);
  let done = 0;
  for (let i = 0; i < 4; i++) {
    const w = new Worker(__filename, { workerData: i });
    w.on('message', (m) => {
      results[i] = m;
      if (++done === 4) {
        const pending = [];
        for (let k = 0; k < 64; k++) {
          const data = Buffer.alloc(200000 + k * 1000, k);
          pending.push(new Promise((res, rej) => zlib.gzip(data, (e, z) => {
            if (e) return rej(e);
            zlib.gunzip(z, (e2, back) => e2 ? rej(e2) : res(crypto.createHash('sha256').update(back).digest('hex').slice(0, 8)));
          })));
        }
        Promise.all(pending).then((hashes) => {
          for (const r of results) console.log(r);
          console.log('async', hashes.join(''));
        });
      }
    });
    w.on('error', (e) => { console.error(e); process.exit(1); });
  }
} else {
  const id = workerData;
  const map = new Map();
  const h = crypto.createHash('sha256');
  for (let i = 0; i < 150000; i++) {
    const key = 'k' + ((i * 7919 + id) % 60000);
    const b = Buffer.from(key.repeat(1 + (i % 40)));
    map.set(key, b);
    if (i % 3 === 0) map.delete('k' + ((i * 31) % 60000));
  }
  for (const [k, v] of [...map.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    h.update(k).update(v);
  }
  for (let i = 0; i < 100; i++) {
    const z = zlib.gzipSync(Buffer.alloc(50000 + i * 997, (i + id) & 255));
    h.update(zlib.gunzipSync(z));
  }
  parentPort.postMessage(`worker ${id}: ${map.size} keys, sha256 ${h.digest('hex')}`);
}
