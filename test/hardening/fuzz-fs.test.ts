import t from 'tap'
import { startEmbedded } from './raw.js'
import { codeFuzz, uploadFuzz } from './fuzz.js'

// On fs + LMDB: both properties, 2,000 runs each.
uploadFuzz(t, startEmbedded, 2000)
codeFuzz(t, startEmbedded, 2000)
