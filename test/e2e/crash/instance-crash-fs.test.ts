import t from 'tap'
import { instanceCrashSuite } from './instance-crash.js'

// Two processes on one DATA_DIR: the embedded pair's way to run more than one instance.
instanceCrashSuite(t, 'fs+local', {})
