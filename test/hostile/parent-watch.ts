/**
 * Loaded into a service that a harness or a bench starts (`node --import parent-watch.js
 * dist/src/server.js`), never by the service itself.
 *
 * A harness that is itself ended without a chance to stop what it started (kill -9, or a test
 * runner stopping a test file's process) would leave the service running, holding its port and
 * its store, until someone finds it by PID. So the service watches its parent: when the parent is
 * gone (the process is handed to another parent), it stops itself as SIGTERM stops it.
 */
const parent = process.ppid
const parentWatch = setInterval(() => {
  if (process.ppid === parent) return
  clearInterval(parentWatch)
  process.kill(process.pid, 'SIGTERM')
}, 500)
parentWatch.unref()
