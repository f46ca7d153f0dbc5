import t from 'tap'
import { roundTripSuite } from './round-trip.js'

await roundTripSuite(t, 'fs+local', {})
