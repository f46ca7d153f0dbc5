import t from 'tap'
import { tusSuite } from './tus.js'

tusSuite(t, 'fs+local', {})
