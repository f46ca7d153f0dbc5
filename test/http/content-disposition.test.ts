import t from 'tap'
import { attachmentDisposition } from '../../src/http/content-disposition.js'
import { cleanFilename, contentTypeFor } from '../../src/core/filename.js'

t.test('ASCII names need no filename*', async t => {
  t.equal(attachmentDisposition('a b.txt'), 'attachment; filename="a b.txt"')
})

t.test('non-ASCII, quotes, backslashes and percent get a fallback and an RFC 8187 filename*', async t => {
  t.equal(attachmentDisposition('naïve.txt'), 'attachment; filename="naive.txt"; filename*=UTF-8\'\'na%C3%AFve.txt')
  t.equal(attachmentDisposition('a"b\\c.txt'), 'attachment; filename="a_b_c.txt"; filename*=UTF-8\'\'a%22b%5Cc.txt')
  t.equal(attachmentDisposition('100%.txt'), 'attachment; filename="100_.txt"; filename*=UTF-8\'\'100%25.txt')
  t.equal(attachmentDisposition("it's (1)*.txt"), 'attachment; filename="it\'s (1)*.txt"')
  t.equal(attachmentDisposition('日本.txt'), 'attachment; filename="__.txt"; filename*=UTF-8\'\'%E6%97%A5%E6%9C%AC.txt')
})

t.test('the header never contains a control character, whatever the name', async t => {
  for (let c = 0; c < 0x110; c++) {
    const header = attachmentDisposition(`a${String.fromCharCode(c)}b`)
    t.notMatch(header, /[\x00-\x1f\x7f]/, `char ${c}`) // eslint-disable-line no-control-regex
  }
})

t.test('cleanFilename keeps the base name only', async t => {
  t.equal(cleanFilename('../../etc/passwd'), 'passwd')
  t.equal(cleanFilename('C:\\x\\y.txt'), 'y.txt')
  t.equal(cleanFilename('a\r\nb\u0000c\u2028.txt'), 'abc.txt')
  t.equal(cleanFilename(''), 'download')
  t.equal(cleanFilename(undefined), 'download')
  t.equal(cleanFilename('..'), 'download')
  t.equal(cleanFilename('dir/'), 'download')
  t.equal(cleanFilename('  spaced.txt  '), 'spaced.txt')
})

t.test('cleanFilename removes bidirectional controls (filename_bidi_spoof)', async t => {
  t.equal(cleanFilename('invoice\u202efdp.exe'), 'invoicefdp.exe', 'RIGHT-TO-LEFT OVERRIDE: would show as invoice.exe.pdf')
  t.equal(cleanFilename('a\u202ab\u202bc\u202cd\u202de\u2066f\u2067g\u2068h\u2069i\u200ej\u200fk\u061cl.txt'), 'abcdefghijkl.txt')
  t.equal(cleanFilename('שלום.txt'), 'שלום.txt', 'right-to-left text itself stays')
})

t.test('cleanFilename caps names at 255 UTF-8 bytes, keeping the extension', async t => {
  const long = cleanFilename('é'.repeat(1000) + '.tar.gz')
  t.ok(Buffer.byteLength(long) <= 255)
  t.ok(long.endsWith('.gz'))
  t.notMatch(long, /\uFFFD/, 'cut on a character boundary')
  t.equal(cleanFilename('a'.repeat(255)), 'a'.repeat(255))
})

t.test('content types: a safe list by extension, octet-stream for the rest', async t => {
  t.equal(contentTypeFor('a.PNG'), 'image/png')
  t.equal(contentTypeFor('a.tar.gz'), 'application/gzip')
  for (const name of ['a.html', 'a.htm', 'a.svg', 'a.xml', 'a.pdf', 'a.js', 'a.xhtml', 'a', 'a.exe']) {
    t.equal(contentTypeFor(name), 'application/octet-stream', name)
  }
})
