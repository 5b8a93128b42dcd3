import { createHook } from 'node:async_hooks'

/**
 * Importing this module keeps two of `process.nextTick`'s tick objects alive for the life of the
 * process, so that V8 never collects their hidden classes (maps). server.ts imports it first.
 *
 * Why: nextTick builds each tick object with the literal
 * `{ [async_id_symbol]: ..., [trigger_async_id_symbol]: ..., callback, args }`. Its computed keys
 * make V8 add them one map transition at a time, and those transitions are weak. Tick objects
 * live for a tick, so a full GC that runs while none is queued (the memory reducer's GCs when a
 * server goes idle, any mark-compact under light load) frees the whole chain of maps. The next
 * tick objects get new maps; the literal's inline caches record them beside the old ones, and
 * after a few such GCs they go megamorphic. From then on, every nextTick (Node's HTTP code makes
 * about six per request) defines its properties through the runtime, about 300 ns instead of
 * 60, and the process serves 15-25% fewer requests for as long as it lives. Of servers preloaded
 * as the benchmark does and left idle for 10-40 s, 6 of 8 floor and 7 of 10 service processes
 * were in that state when load came; with the tick objects kept, 0 of 8 and 0 of 10.
 *
 * The tick objects are caught through a one-off async hook, the only public way to reach them;
 * the hook is disabled before this module finishes loading, so it costs nothing afterwards.
 * The figures above are Node 20's; Node 24 builds tick objects the same way and goes
 * megamorphic the same way without this module (test/http/tick-shapes.test.ts, run on both by CI).
 */
function keepTickObjects(): readonly object[] {
  const kept: object[] = []
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject') kept.push(resource)
    },
  })
  hook.enable()
  try {
    // Without arguments (args: undefined) and with one (args: an array): both shapes Node makes.
    process.nextTick(() => {})
    process.nextTick((_value: unknown) => {}, 0)
  } finally {
    hook.disable()
  }
  return kept
}

/** The tick objects kept alive (two, unless a later Node no longer reports them). */
export const keptTickObjects: readonly object[] = keepTickObjects()
