// A question is pending on stdin (registered with epoll for input) while a
// timer prints every 20 ms: an event loop that is busy, not waiting.
const readline = require('node:readline');

const rl = readline.createInterface({ input: process.stdin, output: process.stdout });
rl.question('Continue? ', (answer) => {
  console.log(`answer=${answer}`);
  process.exit(0);
});
let n = 0;
setInterval(() => console.log(`tick ${n++}`), 20);
