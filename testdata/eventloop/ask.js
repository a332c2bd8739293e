// Asks two questions with readline's rl.question, the way Node CLIs
// (npm init, create-* tools) prompt; the main thread waits in epoll_pwait.
const readline = require('node:readline');

const rl = readline.createInterface({ input: process.stdin, output: process.stdout });
rl.question('Project name? ', (name) => {
  console.log(`name=${name}`);
  rl.question('License? ', (license) => {
    console.log(`license=${license}`);
    rl.close();
  });
});
