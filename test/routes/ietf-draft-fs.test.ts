import t from 'tap'
import { ietfDraftSuite } from './ietf-draft.js'

ietfDraftSuite(t, 'fs+local', {})
