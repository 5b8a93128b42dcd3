/** How the feed paces itself; `DEFAULT_FEED_TUNING` has the shipped values. */
export interface FeedTuning {
  /** Streams open at once (MAX_EVENT_STREAMS); a stream beyond it is refused with 503. */
  maxStreams: number
  /** A comment is sent to every stream this often, so that idle ones stay open, in ms. */
  heartbeatMs: number
  /**
   * Changes are written to the streams at most this often, in ms: a change that follows a quiet
   * spell goes out at once, and under a stream of writes each stream gets one write per interval
   * holding every change since the last, rather than one write per change.
   */
  flushMs: number
  /** A stream whose unsent backlog passes this many bytes is closed; its client resumes by id. */
  maxBacklogBytes: number
  /**
   * A stream sent its history at the pace its client reads is closed when the client reads
   * nothing for this long, in ms (as nginx's `send_timeout`); its client resumes by id.
   */
  stallMs: number
  /** Changes read from the store's history at a time while a stream catches up. */
  historyPage: number
}

/** Streams open over several feeds (one per notebook), which share MAX_EVENT_STREAMS. */
export class StreamCount {
  open = 0
}

export const DEFAULT_FEED_TUNING: Readonly<FeedTuning> = Object.freeze({
  maxStreams: 1000,
  heartbeatMs: 15_000,
  flushMs: 10,
  maxBacklogBytes: 1024 * 1024,
  stallMs: 60_000,
  historyPage: 500,
})
