// An HTTP server that never touches its stdin: its epoll instance watches
// sockets only. It prints its port once, then serves quietly.
const http = require('node:http');

const server = http.createServer((req, res) => res.end('ok\n'));
server.listen(0, '127.0.0.1', () => console.log(`port=${server.address().port}`));
