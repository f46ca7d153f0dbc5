import t from 'tap'
import { singleFileSuite } from './single-file.js'

singleFileSuite(t, 'fs+local', {})
