import t from 'tap'
import { testEnv } from '../helpers/app.js'
import { cliIntegritySuite } from './integrity.js'

await cliIntegritySuite(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))
