import t from 'tap'
import { chunkedSuite } from './chunked.js'
import { integritySuite } from './integrity.js'
import { keysSuite } from './keys.js'
import { singleFileSuite } from './single-file.js'

singleFileSuite(t, 'fs+local', {})
chunkedSuite(t, 'fs+local', {})
keysSuite(t, 'fs+local', {})
integritySuite(t, 'fs+local', {})
