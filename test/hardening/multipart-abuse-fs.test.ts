import t from 'tap'
import { multipartAbuseSuite } from './multipart-abuse.js'
import { startEmbedded } from './raw.js'

multipartAbuseSuite(t, startEmbedded)
