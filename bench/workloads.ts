/** The six workloads of the benchmark, each run on a fresh server of every target. */

export type WorkloadId = 'W1' | 'W2' | 'W3' | 'W4' | 'W5' | 'W6'

/** One request, sent over and over by the load generator. */
export interface LoadRequest {
  method: 'GET' | 'POST' | 'PATCH'
  path: string
  /** JSON text, sent with Content-Type: application/json. */
  body?: string
  /** Further request headers (W7: If-None-Match, W10: Accept-Encoding). */
  headers?: Record<string, string>
  /** The status every answer must have; 200 unless said. */
  status?: number
}

/** Ids the preload learned from the server's answers. */
export interface PreloadedIds {
  /** The id of the note created halfway through the preload (undefined when nothing was preloaded). */
  middle: number | undefined
  /** The id of the note created last, alone, after every other one. */
  last: number | undefined
  /** The list's ETag after the preload (read for the workloads measured against the service). */
  listEtag?: string
}

export interface Workload {
  id: WorkloadId
  title: string
  /** Small notes created over HTTP before the load starts. */
  preload: number
  request: (ids: PreloadedIds) => LoadRequest
  /** Service/floor throughput ratio the service must reach. */
  floorTarget: number
}

const TEXT = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor'

/** 7 -> '{"title":"note 7","body":"Lorem ipsum ... tempor"}' (about 100 bytes) */
export function smallNote(n: number): string {
  return JSON.stringify({ title: `note ${n}`, body: TEXT })
}

function idOf(id: number | undefined): number {
  if (id === undefined) throw new Error('the workload needs a preloaded note')
  return id
}

export const WORKLOADS: readonly Workload[] = [
  {
    id: 'W1',
    title: 'GET one note of 1,000 (a middle id)',
    preload: 1_000,
    request: (ids) => ({ method: 'GET', path: `/api/note/${idOf(ids.middle)}` }),
    floorTarget: 0.9,
  },
  {
    id: 'W2',
    title: 'GET the list of 100 small notes',
    preload: 100,
    request: () => ({ method: 'GET', path: '/api/note' }),
    floorTarget: 0.95,
  },
  {
    id: 'W3',
    title: 'GET the list of 10,000 small notes',
    preload: 10_000,
    request: () => ({ method: 'GET', path: '/api/note' }),
    floorTarget: 1.5,
  },
  {
    id: 'W4',
    title: 'POST a ~100-byte note (the store grows)',
    preload: 0,
    request: () => ({ method: 'POST', path: '/api/note', body: smallNote(1_000_000) }),
    floorTarget: 0.9,
  },
  {
    id: 'W5',
    title: 'PATCH a note of 1,000 with a small body',
    preload: 1_000,
    request: (ids) => ({
      method: 'PATCH',
      path: `/api/note/${idOf(ids.middle)}`,
      body: JSON.stringify({ title: 'note edited' }),
    }),
    floorTarget: 0.9,
  },
  {
    id: 'W6',
    title: 'GET the last-created note of 100,000',
    preload: 100_000,
    request: (ids) => ({ method: 'GET', path: `/api/note/${idOf(ids.last)}` }),
    floorTarget: 0.9,
  },
]

/** One request of a workload measured against the service's own figure for another (W7-W10). */
export interface Leg {
  /** 'W7', or the workload it is compared with: 'W3'. */
  label: string
  preload: number
  request: (ids: PreloadedIds) => LoadRequest
}

/** `of` req/s / `over` req/s, in the same round, must be at least `atLeast` (or within `within`). */
export interface LegTarget {
  of: string
  over: string
  atLeast?: number
  /** |1 - ratio| at most this. */
  within?: number
  why: string
}

/**
 * A workload of the service alone, measured against the service's own figure for a reference
 * request in the same round: each leg on a fresh service, driven in interleaved slices like the
 * targets of the other workloads, so the ratio compares two requests under the same conditions.
 */
export interface RelativeWorkload {
  id: 'W7' | 'W8' | 'W10'
  title: string
  legs: Leg[]
  targets: LegTarget[]
}

function etagOf(ids: PreloadedIds): string {
  if (ids.listEtag === undefined) throw new Error('the workload needs the list ETag')
  return ids.listEtag
}

const PAGE = '/api/note?limit=100&order=desc'

export const RELATIVE_WORKLOADS: readonly RelativeWorkload[] = [
  {
    id: 'W7',
    title: 'GET the list of 10,000 with a matching If-None-Match (304), against W3',
    legs: [
      {
        label: 'W7',
        preload: 10_000,
        request: (ids) => ({
          method: 'GET',
          path: '/api/note',
          headers: { 'if-none-match': etagOf(ids) },
          status: 304,
        }),
      },
      { label: 'W3', preload: 10_000, request: () => ({ method: 'GET', path: '/api/note' }) },
    ],
    targets: [{ of: 'W7', over: 'W3', atLeast: 10, why: 'a 304 costs a tenth of the list' }],
  },
  {
    id: 'W8',
    title: 'GET ?limit=100&order=desc with 100,000 notes, against W2 and against 1,000 notes',
    legs: [
      { label: 'W8', preload: 100_000, request: () => ({ method: 'GET', path: PAGE }) },
      { label: 'W8@1k', preload: 1_000, request: () => ({ method: 'GET', path: PAGE }) },
      { label: 'W2', preload: 100, request: () => ({ method: 'GET', path: '/api/note' }) },
    ],
    targets: [
      { of: 'W8', over: 'W2', atLeast: 0.5, why: 'a page costs at most twice the cached list' },
      {
        of: 'W8',
        over: 'W8@1k',
        within: 0.1,
        why: 'a page costs the same whatever the store holds',
      },
    ],
  },
  {
    id: 'W10',
    title: 'GET the list of 10,000 with Accept-Encoding: gzip, against W3',
    legs: [
      {
        label: 'W10',
        preload: 10_000,
        request: () => ({
          method: 'GET',
          path: '/api/note',
          headers: { 'accept-encoding': 'gzip' },
        }),
      },
      { label: 'W3', preload: 10_000, request: () => ({ method: 'GET', path: '/api/note' }) },
    ],
    targets: [
      { of: 'W10', over: 'W3', atLeast: 0.9, why: 'the compressed list is cached per version' },
    ],
  },
]
