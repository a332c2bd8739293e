//go:build !linux

package agentproc

// Outside Linux there are no exit records to take a tree's peak from: the
// leader's ru_maxrss (or a Job Object's peak) is reported as it is.

// treePeaks holds nothing outside Linux.
type treePeaks struct{}

func (*treePeaks) mark() peakMark { return peakMark{} }
func (*treePeaks) close()         {}

// peakMark carries nothing outside Linux.
type peakMark struct{}

func (peakMark) watch(int) {}
func (peakMark) done()     {}

func (peakMark) of(_ int, rss int64) int64 { return rss }
