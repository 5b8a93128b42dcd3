import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { parseAcceptEncoding } from '../../src/api/compression.js'
import { PAGE_CSP, pageCsp, SERVICE_WORKER } from '../../src/pages/notes-page.js'
import { type PatchPlan, planPatch } from '../../src/ui/note-patch.js'
import { buildOpsApp } from '../support/ops-app.js'

const SOURCES = new URL('../../../src/ui/', import.meta.url)
const COMPILED = new URL('../../src/page/ui/', import.meta.url)
const CLIENT = new URL('../../src/page/client/', import.meta.url)
const NOT_FOUND = {
  type: 'about:blank',
  title: 'Not Found',
  status: 404,
  detail: 'Nothing is served at this path; the notes are at /api/note.',
}

/** The page's files as built: name -> [content type, bytes]. */
function builtFiles(): Map<string, [string, Buffer]> {
  const files = new Map<string, [string, Buffer]>([
    ['style.css', ['text/css; charset=utf-8', readFileSync(new URL('style.css', SOURCES))]],
    ['icon.svg', ['image/svg+xml', readFileSync(new URL('icon.svg', SOURCES))]],
    ['icon-maskable.svg', ['image/svg+xml', readFileSync(new URL('icon-maskable.svg', SOURCES))]],
    [
      'manifest.webmanifest',
      ['application/manifest+json', readFileSync(new URL('manifest.webmanifest', SOURCES))],
    ],
  ])
  for (const name of readdirSync(COMPILED).filter((n) => n.endsWith('.js'))) {
    files.set(name, ['text/javascript; charset=utf-8', readFileSync(new URL(name, COMPILED))])
  }
  const client = readdirSync(CLIENT, { recursive: true, encoding: 'utf8' })
  for (const name of client.filter((n) => n.endsWith('.js'))) {
    const path = name.replaceAll('\\', '/')
    files.set(`client/${path}`, [
      'text/javascript; charset=utf-8',
      readFileSync(new URL(path, CLIENT)),
    ])
  }
  // oauth4webapi's ES module as the package ships it, for signing in.
  files.set('vendor/oauth4webapi.js', [
    'text/javascript; charset=utf-8',
    readFileSync(new URL(import.meta.resolve('oauth4webapi'))),
  ])
  return files
}

describe('GET / (the notes page) and its files under /ui/', () => {
  it('serves the page with its policy, and every file it links, byte for byte', async () => {
    const { app } = buildOpsApp()
    const page = await app.inject({ method: 'GET', url: '/' })
    assert.equal(page.statusCode, 200)
    const { date: _date, 'x-request-id': _id, etag, ...headers } = page.headers
    assert.match(String(etag), /^"[\w-]{27}"$/)
    assert.deepEqual(headers, {
      'content-security-policy': PAGE_CSP,
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-cache',
      vary: 'Accept-Encoding',
      'x-content-type-options': 'nosniff',
      'content-type': 'text/html; charset=utf-8',
      'content-length': String(readFileSync(new URL('index.html', SOURCES)).length),
      connection: 'keep-alive',
    })
    assert.equal(page.body, readFileSync(new URL('index.html', SOURCES), 'utf8'))
    // No inline script or style, nothing from another host.
    assert.doesNotMatch(page.body, /<script>|<style|\sstyle=|\son\w+=|https?:\/\//)
    const linked = [...page.body.matchAll(/(?:href|src)="\/ui\/([^"]+)"/g)].map((m) => m[1])
    const built = builtFiles()
    // Every module is preloaded (no import waterfall), and nothing else is linked; the service
    // worker is registered by main.js, oauth4webapi loaded by sign-in.js when it first talks
    // to a provider, and the replica's queued files by replica.js when a file is first attached
    // (the service worker keeps it for offline use), none of them linked.
    const QUEUED_FILES = 'client/replica/queued-files.js'
    assert.deepEqual(
      [...linked, SERVICE_WORKER, 'vendor/oauth4webapi.js', QUEUED_FILES].sort(),
      [...built.keys()].sort(),
    )
    assert.ok(built.has('client/notes-client.js'), 'the client library is served under /ui/client/')
    for (const [name, [contentType, bytes]] of built) {
      const file = await app.inject({ method: 'GET', url: `/ui/${name}` })
      assert.equal(file.statusCode, 200, name)
      assert.equal(file.headers['content-type'], contentType, name)
      assert.equal(file.headers['cache-control'], 'no-cache', name)
      assert.equal(file.headers['content-security-policy'], undefined, name)
      assert.deepEqual(file.rawPayload, bytes, name)
    }
  })

  it('sends brotli or gzip as the client accepts, each with its own ETag, and 304 for that one', async () => {
    const { app } = buildOpsApp()
    const plain = await app.inject({ method: 'GET', url: '/ui/note-item.js' })
    const tag = String(plain.headers.etag).slice(0, -1)
    const cases = [
      { accept: 'gzip, deflate, br', encoding: 'br', etag: `${tag}-br"` },
      { accept: 'gzip', encoding: 'gzip', etag: `${tag}-gzip"` },
      { accept: 'br;q=0, gzip;q=0.5', encoding: 'gzip', etag: `${tag}-gzip"` },
      { accept: 'identity', encoding: undefined, etag: `${tag}"` },
    ]
    for (const { accept, encoding, etag } of cases) {
      const headers = { 'accept-encoding': accept }
      const file = await app.inject({ method: 'GET', url: '/ui/note-item.js', headers })
      assert.equal(file.statusCode, 200, accept)
      assert.equal(file.headers['content-encoding'], encoding, accept)
      assert.equal(file.headers.etag, etag, accept)
      assert.equal(file.headers.vary, 'Accept-Encoding', accept)
      const body =
        encoding === 'br'
          ? brotliDecompressSync(file.rawPayload)
          : encoding === 'gzip'
            ? gunzipSync(file.rawPayload)
            : file.rawPayload
      assert.deepEqual(body, plain.rawPayload, accept)
      assert.ok(file.rawPayload.length <= plain.rawPayload.length, accept)
      const again = await app.inject({
        method: 'GET',
        url: '/ui/note-item.js',
        headers: { ...headers, 'if-none-match': etag },
      })
      assert.equal(again.statusCode, 304, accept)
      assert.equal(again.headers.etag, etag, accept)
      assert.equal(again.headers['content-encoding'], undefined, accept)
      assert.equal(again.body, '', accept)
    }
    // The brotli copy's ETag does not revalidate the gzip one.
    const other = await app.inject({
      method: 'GET',
      url: '/ui/note-item.js',
      headers: { 'accept-encoding': 'gzip', 'if-none-match': `${tag}-br"` },
    })
    assert.equal(other.statusCode, 200)
  })

  it('answers HEAD like GET without a body', async () => {
    const { app } = buildOpsApp()
    const get = await app.inject({ method: 'GET', url: '/' })
    const head = await app.inject({ method: 'HEAD', url: '/' })
    assert.equal(head.statusCode, 200)
    assert.equal(head.body, '')
    assert.equal(head.headers.etag, get.headers.etag)
    assert.equal(head.headers['content-length'], get.headers['content-length'])
  })

  it('answers 404 problem JSON for a file the page does not have', async () => {
    const { app } = buildOpsApp()
    for (const name of [
      'index.html',
      'main.ts',
      'main.js.map',
      'nope.js',
      '..%2Fpackage.json',
      'client/index.ts',
      'client/index.d.ts',
    ]) {
      const response = await app.inject({ method: 'GET', url: `/ui/${name}` })
      assert.equal(response.statusCode, 404, name)
      assert.equal(response.headers['content-type'], 'application/problem+json')
      assert.deepEqual(response.json(), {
        type: 'about:blank',
        title: 'Not Found',
        status: 404,
        detail: 'The notes page has no such file; open / itself.',
      })
    }
  })

  it('serves the service worker for the whole origin, and a manifest an installer accepts', async () => {
    const { app } = buildOpsApp()
    const worker = await app.inject({ method: 'GET', url: `/ui/${SERVICE_WORKER}` })
    assert.equal(worker.statusCode, 200)
    assert.equal(worker.headers['content-type'], 'text/javascript; charset=utf-8')
    assert.equal(worker.headers['service-worker-allowed'], '/')
    assert.equal(worker.headers['cache-control'], 'no-cache')
    // Only the worker may widen its scope.
    const main = await app.inject({ method: 'GET', url: '/ui/main.js' })
    assert.equal(main.headers['service-worker-allowed'], undefined)

    const answer = await app.inject({ method: 'GET', url: '/ui/manifest.webmanifest' })
    assert.equal(answer.statusCode, 200)
    assert.equal(answer.headers['content-type'], 'application/manifest+json')
    const manifest = answer.json() as {
      start_url: string
      display: string
      theme_color: string
      icons: { src: string; sizes: string; type: string; purpose: string }[]
    }
    assert.equal(manifest.start_url, '/')
    assert.equal(manifest.display, 'standalone')
    assert.match(manifest.theme_color, /^#[0-9a-f]{6}$/)
    for (const size of ['192x192', '512x512']) {
      assert.ok(
        manifest.icons.some((icon) => icon.sizes.split(' ').includes(size)),
        `an icon of ${size}`,
      )
    }
    assert.deepEqual(manifest.icons.map((icon) => icon.purpose).sort(), ['any', 'maskable'])
    for (const icon of manifest.icons) {
      const file = await app.inject({ method: 'GET', url: icon.src })
      assert.equal(file.statusCode, 200, icon.src)
      assert.equal(file.headers['content-type'], icon.type, icon.src)
    }
    // The page links the manifest, and its policy lets the worker and the manifest load.
    const page = await app.inject({ method: 'GET', url: '/' })
    assert.match(page.body, /<link rel="manifest" href="\/ui\/manifest.webmanifest">/)
    assert.match(PAGE_CSP, /worker-src 'self'/)
    assert.match(PAGE_CSP, /manifest-src 'self'/)
    assert.match(PAGE_CSP, /require-trusted-types-for 'script'/)
  })

  it('weighs under 80 KB in brotli, everything it loads counted (HTML, CSS, JS, manifest, icons, worker)', async (t) => {
    const { app } = buildOpsApp()
    const br = { 'accept-encoding': 'br' }
    const page = await app.inject({ method: 'GET', url: '/', headers: br })
    const names = [...builtFiles().keys()]
    let total = page.rawPayload.length
    const sizes: Record<string, number> = { '/': page.rawPayload.length }
    for (const name of names) {
      const file = await app.inject({ method: 'GET', url: `/ui/${name}`, headers: br })
      assert.equal(file.statusCode, 200, name)
      sizes[name] = file.rawPayload.length
      total += file.rawPayload.length
    }
    t.diagnostic(`the page's files in brotli: ${total} bytes in all; ${JSON.stringify(sizes)}`)
    assert.ok(names.includes(SERVICE_WORKER) && names.includes('manifest.webmanifest'))
    assert.ok(total < 80 * 1024, `${total} bytes`)
  })

  it('serves neither the page nor its files with UI=false: a 404 that says how to turn it on', async () => {
    const { app } = buildOpsApp({ ui: false })
    for (const url of ['/', '/ui/main.js', '/ui/style.css']) {
      const response = await app.inject({ method: 'GET', url })
      assert.equal(response.statusCode, 404, url)
      assert.equal(response.headers['content-type'], 'application/problem+json', url)
      assert.deepEqual(
        response.json(),
        {
          ...NOT_FOUND,
          detail:
            'The notes page (/) is off: start the service with UI=true (or the flag --ui) to serve it.',
        },
        url,
      )
    }
    // Any other path is the 404 of a path that is not the service's, as with the page on.
    const other = await app.inject({ method: 'GET', url: '/uix' })
    assert.deepEqual(other.json(), NOT_FOUND)
  })

  it('says at /ui/sign-in.json how the page signs people in, and lets it reach that provider alone', async () => {
    const plain = buildOpsApp().app
    const none = await plain.inject({ method: 'GET', url: '/ui/sign-in.json' })
    assert.equal(none.statusCode, 200)
    assert.equal(none.headers['content-type'], 'application/json; charset=utf-8')
    assert.equal(none.headers['cache-control'], 'no-cache')
    assert.equal(none.body, '{}')
    const { app } = buildOpsApp({
      authJwksUrl: 'https://idp.example/jwks',
      authIssuer: 'https://idp.example/realms/notes',
      authAudience: 'notes',
      authPageClientId: 'notes-page',
      authPageScope: 'openid offline_access',
    })
    const settings = await app.inject({ method: 'GET', url: '/ui/sign-in.json' })
    assert.deepEqual(settings.json(), {
      issuer: 'https://idp.example/realms/notes',
      client_id: 'notes-page',
      scope: 'openid offline_access',
    })
    const page = await app.inject({ method: 'GET', url: '/' })
    assert.equal(page.headers['content-security-policy'], pageCsp('https://idp.example'))
    assert.match(
      String(page.headers['content-security-policy']),
      /; connect-src 'self' https:\/\/idp\.example; /,
    )
    assert.match(PAGE_CSP, /; connect-src 'self'; /)
  })

  it('stays open with access keys on: the page holds no notes, and asks for a key itself', async () => {
    const { app } = buildOpsApp({ apiKeys: ['k1'], apiReadKeys: ['r1'] })
    for (const url of ['/', '/ui/main.js']) {
      assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url)
    }
    assert.equal((await app.inject({ method: 'GET', url: '/api/note' })).statusCode, 401)
  })

  it('leaves the note routes as they were', async () => {
    const withPage = buildOpsApp({ ui: true }, undefined, () => 1000).app
    const without = buildOpsApp({ ui: false }, undefined, () => 1000).app
    for (const app of [withPage, without]) {
      const created = await app.inject({ method: 'POST', url: '/api/note', payload: { a: 1 } })
      assert.equal(created.statusCode, 200)
    }
    const strip = (headers: Record<string, unknown>) => {
      const { date: _d, 'x-request-id': _r, ...rest } = headers
      return rest
    }
    assert.equal((await withPage.inject('/api/note/1000')).statusCode, 200)
    const a = await withPage.inject({ method: 'GET', url: '/api/note/1000' })
    const b = await without.inject({ method: 'GET', url: '/api/note/1000' })
    assert.deepEqual(
      [a.statusCode, strip(a.headers), a.body],
      [b.statusCode, strip(b.headers), b.body],
    )
  })
})

describe("the page's Accept-Encoding and If-None-Match: the API's rules", () => {
  // Each header -> the coding of / (large enough that every coding makes it smaller): the one
  // the API's parser picks for its answers.
  const codings: [string | undefined, string | undefined][] = [
    [undefined, undefined],
    ['', undefined],
    ['gzip, deflate, br', 'br'],
    ['gzip, deflate, br, zstd', 'br'],
    ['gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['br; q=0.1, gzip;q=1', 'gzip'],
    ['br;q=2, gzip', 'gzip'],
    ['*', 'br'],
    ['*;q=0', undefined],
    ['gzip, *;q=0', 'gzip'],
    ['deflate', undefined],
    ['identity', undefined],
    ['gzip;q=0.5, identity', undefined],
    ['identity;q=0', undefined],
    ['gzip, identity;q=0', 'gzip'],
  ]
  for (const [header, coding] of codings) {
    it(`answers / to Accept-Encoding ${JSON.stringify(header)} in ${coding ?? 'identity'}`, async () => {
      const { app } = buildOpsApp()
      const headers = header === undefined ? {} : { 'accept-encoding': header }
      const page = await app.inject({ method: 'GET', url: '/', headers })
      assert.equal(page.statusCode, 200)
      assert.equal(page.headers['content-encoding'], coding)
      assert.equal(header === undefined ? undefined : parseAcceptEncoding(header)?.coding, coding)
    })
  }

  it('compresses every file when identity is refused (identity;q=0), as the API does', async () => {
    const { app } = buildOpsApp()
    for (const name of builtFiles().keys()) {
      const url = name === 'index.html' ? '/' : `/ui/${name}`
      const plain = await app.inject({ method: 'GET', url })
      const refused = await app.inject({
        method: 'GET',
        url,
        headers: { 'accept-encoding': 'gzip, identity;q=0' },
      })
      assert.equal(refused.headers['content-encoding'], 'gzip', name)
      assert.deepEqual(gunzipSync(refused.rawPayload), plain.rawPayload, name)
      assert.equal(refused.headers.etag, `${String(plain.headers.etag).slice(0, -1)}-gzip"`, name)
    }
  })

  it('answers 304 to a strong, weak or listed ETag of the encoding sent, and * ', async () => {
    const { app } = buildOpsApp()
    const br = { 'accept-encoding': 'br' }
    const plain = await app.inject({ method: 'GET', url: '/' })
    const compressed = await app.inject({ method: 'GET', url: '/', headers: br })
    const etag = String(plain.headers.etag)
    const brEtag = String(compressed.headers.etag)
    assert.equal(brEtag, `${etag.slice(0, -1)}-br"`)
    const cases: [Record<string, string>, string, number][] = [
      [{}, etag, 304],
      [{}, `W/${etag}`, 304],
      [{}, `"other", ${etag}`, 304],
      [{}, `"other",W/${etag} , "more"`, 304],
      [{}, '*', 304],
      [{}, '"other"', 200],
      [{}, brEtag, 200],
      [br, brEtag, 304],
      [br, `W/${brEtag}`, 304],
      [br, etag, 200],
    ]
    for (const [headers, ifNoneMatch, status] of cases) {
      const answer = await app.inject({
        method: 'GET',
        url: '/',
        headers: { ...headers, 'if-none-match': ifNoneMatch },
      })
      const label = `${JSON.stringify(headers)} If-None-Match: ${ifNoneMatch}`
      assert.equal(answer.statusCode, status, label)
      assert.equal(answer.headers.etag, headers === br ? brEtag : etag, label)
    }
  })
})

describe('planPatch (what the page sends for an edit)', () => {
  const cases: { name: string; before: object; after: object; plan: PatchPlan }[] = [
    {
      name: 'nothing changed',
      before: { a: 1, b: [1] },
      after: { b: [1], a: 1 },
      plan: { kind: 'unchanged' },
    },
    {
      name: 'a changed and an added field: the spec PATCH',
      before: { a: 1, b: 2 },
      after: { a: 1, b: 3, c: null },
      plan: { kind: 'patch', contentType: 'application/json', body: { b: 3, c: null } },
    },
    {
      name: 'a nested object is sent whole by the spec PATCH',
      before: { m: { x: 1, y: 2 } },
      after: { m: { x: 1, y: 3 } },
      plan: { kind: 'patch', contentType: 'application/json', body: { m: { x: 1, y: 3 } } },
    },
    {
      name: 'a removed field: a merge patch with null',
      before: { a: 1, b: 2 },
      after: { a: 1 },
      plan: { kind: 'patch', contentType: 'application/merge-patch+json', body: { b: null } },
    },
    {
      name: 'removed at depth, changed beside it',
      before: { m: { x: 1, y: 2 }, t: 'a', gone: true },
      after: { m: { x: 1 }, t: 'b' },
      plan: {
        kind: 'patch',
        contentType: 'application/merge-patch+json',
        body: { gone: null, m: { y: null }, t: 'b' },
      },
    },
    {
      name: 'removing while setting a null cannot be one PATCH',
      before: { a: 1, b: 2 },
      after: { a: null },
      plan: {
        kind: 'impossible',
        why: 'Removing a field and setting another value to null cannot be saved at once: save the removal first, then the null.',
      },
    },
  ]
  for (const { name, before, after, plan } of cases) {
    it(name, () => {
      assert.deepEqual(
        planPatch(before as Record<string, unknown>, after as Record<string, unknown>),
        plan,
      )
    })
  }
})
