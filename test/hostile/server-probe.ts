/**
 * Loaded into the service only by the test harness (`node --expose-gc --import server-probe.js
 * dist/src/server.js`), never by the service itself: it answers the harness over the IPC channel
 * that only the parent process holds, so nothing is exposed on the network.
 *   { type: 'heap' }          -> { type: 'heap', heapUsed }  after two full GCs
 *   { type: 'stall', ms }     -> blocks the event loop for ms, then { type: 'stalled' }
 */
interface ProbeMessage {
  type?: string
  ms?: number
}

const gc = (globalThis as { gc?: () => void }).gc

process.on('message', (message: ProbeMessage) => {
  if (message.type === 'heap') {
    gc?.()
    gc?.()
    process.send?.({ type: 'heap', heapUsed: process.memoryUsage().heapUsed })
  } else if (message.type === 'stall') {
    const until = Date.now() + (message.ms ?? 0)
    while (Date.now() < until) {
      // Busy on purpose: this is the stall.
    }
    process.send?.({ type: 'stalled' })
  }
})
// The channel must not keep the service alive: a graceful shutdown still ends the process.
process.channel?.unref()
