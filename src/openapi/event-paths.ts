import { header, type Paths, problemResponse, ref, requestIdHeader } from './parts.js'

/** `notebooks=all`: every notebook the caller can read, over one stream. */
const NOTEBOOKS_PARAMETER = {
  name: 'notebooks',
  in: 'query',
  required: false,
  description:
    'With `all` (a user token), one stream of every notebook the caller can read: `created`, `updated` and `deleted` with `data: {"notebook": <id>, "note": ...}`; `joined` and `left` with `data: {"notebook": <as GET /api/notebooks lists it>}` when the caller gains or loses one; `reset` with `data: {"notebook": <id>}` for one notebook whose history no longer reaches back. Its event ids are opaque and hold every notebook\'s place: `Last-Event-ID` (or `since`) resumes every notebook, each change exactly once. It counts as one stream toward the caps; a service key, another value, or an id this stream did not send is `400`.',
  schema: { type: 'string', enum: ['all'] },
}

const TOKEN_SCHEMA = { type: 'string', pattern: '^[A-Za-z0-9._~-]{1,256}$' }

/**
 * The OpenAPI path of `GET /api/events`, the change feed (event-routes.ts); with `allNotebooks`,
 * its `notebooks=all` form (user tokens on).
 */
export function eventsPaths({ allNotebooks = false }: { allNotebooks?: boolean } = {}): Paths {
  return {
    '/api/events': {
      description: 'The change feed: every write, as Server-Sent Events.',
      get: {
        tags: ['notes'],
        operationId: 'followChanges',
        summary: 'Follow changes (Server-Sent Events)',
        description: `A \`text/event-stream\` of every change after a version, exactly once and in order:

\`\`\`
event: created
id: 1e5rh6yqqd.3
data: {"title":"Groceries","id":1795545943703}
\`\`\`

- \`event\` is \`created\`, \`updated\` or \`deleted\`; \`id\` is the version token after the change (the \`Notes-Version\` a list read then answers); \`data\` is the note as \`GET /api/note/{id}\` answers it inside \`data\`, or \`{"id":<id>}\` for \`deleted\`.
- The stream starts after the token in \`Last-Event-ID\` (what \`EventSource\` sends when it reconnects), else in \`since\`, else at the next change; it opens with \`retry: 2000\` and, without a token, a message that names no event (\`onmessage\` sees it) with \`id:\` the version it starts after and \`data: {"version":"<that version>"}\`, so that every client resumes from there after a drop before the first change.
- A token that is unknown or older than the history kept (\`CHANGE_HISTORY\` changes) starts the stream with \`event: reset\`, \`id:\` the current version and \`data: {"version":"<the token>"}\`: reload the list, then follow on.
- A comment line (\`:\`) comes every 15 s. A client that stops reading is cut off once its backlog passes 1 MiB (or, while it is being sent the history, once it has read nothing for 60 s) and resumes from its last id without loss. Every stream ends when the service shuts down.
- At most \`MAX_EVENT_STREAMS\` streams are open at once: beyond it, \`503\` with \`Retry-After\`.`,
        parameters: [
          {
            name: 'since',
            in: 'query',
            required: false,
            description:
              'Start after this version token: a `Notes-Version` or an event `id`. `Last-Event-ID` wins over it.',
            schema: TOKEN_SCHEMA,
            example: '1e5rh6yqqd.2',
          },
          {
            name: 'Last-Event-ID',
            in: 'header',
            required: false,
            description: 'The `id` of the last event received: the stream resumes after it.',
            schema: { type: 'string', maxLength: 256 },
          },
          ...(allNotebooks ? [NOTEBOOKS_PARAMETER] : []),
          ref('parameters', 'RequestId'),
        ],
        responses: {
          '200': {
            description:
              'The stream; it has no end but a shutdown, a backlog cut-off or the client. `HEAD` answers this head alone.',
            headers: {
              ...requestIdHeader,
              'Cache-Control': header('CacheControl'),
              'X-Accel-Buffering': {
                description: 'Always `no`: tells nginx not to buffer the stream.',
                required: true,
                schema: { type: 'string', const: 'no' },
              },
            },
            content: {
              'text/event-stream': {
                schema: { type: 'string' },
                example:
                  'retry: 2000\n\nevent: created\nid: 1e5rh6yqqd.3\ndata: {"title":"Groceries","id":1795545943703}\n\n',
              },
            },
          },
          '400': problemResponse(
            '`since` or `Last-Event-ID` is not a version token.',
            400,
            'since must be one version token, as Notes-Version or an event id gives it (1 to 256 characters of A-Z a-z 0-9 . _ ~ -).',
          ),
          '503': problemResponse(
            'MAX_EVENT_STREAMS streams are open already, or the service is shutting down (never to `HEAD`).',
            503,
            'The service serves at most 1000 event streams at once; retry after 10 s.',
            { 'Retry-After': header('RetryAfter') },
          ),
        },
      },
    },
  }
}
