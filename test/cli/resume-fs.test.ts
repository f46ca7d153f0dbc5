import t from 'tap'
import { testEnv } from '../helpers/app.js'
import { cliResumeSuite } from './resume.js'

await cliResumeSuite(t, testEnv(t, 'fs+local', {}, { LOG_LEVEL: 'warn' }))
