package agentproc

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// checkLimits accepts every limit: the process's Job Object holds the whole
// tree and enforces all three.
func checkLimits(Limits, *config) error { return nil }

// jobCPURateControl is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION, which
// golang.org/x/sys/windows does not define: the flags and, for a hard cap,
// the rate in hundredths of a percent of all processors.
type jobCPURateControl struct {
	ControlFlags uint32
	CPURate      uint32
}

const (
	jobCPURateControlEnable  = 0x1
	jobCPURateControlHardCap = 0x4
	// maxCPURate is 100% of all processors.
	maxCPURate = 10000
)

// applyLimits writes l into the Job Object that sysProc.prepare created.
// The shell is created suspended and assigned to the job before it runs, so
// it and every descendant run under the limits from their start.
//
// Memory is the job's committed memory (JOB_OBJECT_LIMIT_JOB_MEMORY): an
// allocation that would pass it fails in the process that asked, which
// usually exits with an out-of-memory error of its own; Windows kills
// nothing, so there is no ReasonOOM here. Procs is the job's active
// processes (threads are not counted): a CreateProcess beyond it fails. CPU
// is a hard cap on the job's share of all processors.
func applyLimits(l Limits, s *sysProc, _ *containment) error {
	if l.IsZero() {
		return nil
	}
	s.mu.Lock()
	job := s.job
	s.mu.Unlock()
	if l.Memory > 0 || l.Procs > 0 {
		var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
		if err := windows.QueryInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
			uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
			return xerrors.Errorf("read job object limits: %w", err)
		}
		if l.Memory > 0 {
			info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
			info.JobMemoryLimit = uintptr(l.Memory)
		}
		if l.Procs > 0 {
			info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
			info.BasicLimitInformation.ActiveProcessLimit = uint32(l.Procs)
		}
		if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
			uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
			return xerrors.Errorf("set job object limits (%s): %w", l, err)
		}
	}
	if l.CPU > 0 {
		rate := jobCPURateControl{
			ControlFlags: jobCPURateControlEnable | jobCPURateControlHardCap,
			CPURate:      cpuRate(l.CPU, runtime.NumCPU()),
		}
		if _, err := windows.SetInformationJobObject(job, windows.JobObjectCpuRateControlInformation,
			uintptr(unsafe.Pointer(&rate)), uint32(unsafe.Sizeof(rate))); err != nil {
			return xerrors.Errorf("Limits.CPU: set job object CPU rate: %v: %w", err, ErrUnsupported)
		}
	}
	return nil
}

// cpuRate converts a number of cores to a job CPU rate: hundredths of a
// percent of all ncpu processors, at least 1, at most all of them.
func cpuRate(cores float64, ncpu int) uint32 {
	r := cores / float64(max(ncpu, 1)) * maxCPURate
	return uint32(min(max(r, 1), maxCPURate))
}
