/*
 * bcryptprimitives.c: a stand-in for Windows' bcryptprimitives.dll, built
 * only to run this module's Windows tests under Wine 8.0, which ships no such
 * DLL. The Go runtime loads it from System32 at start-up and calls
 * ProcessPrng for random bytes; without it a Go program dies before main.
 *
 * ProcessPrng forwards to RtlGenRandom, which advapi32 exports under the name
 * SystemFunction036 and Wine implements. RtlGenRandom takes a ULONG length,
 * so larger requests are split. Real Windows never loads this file.
 */
#include <windows.h>

typedef BOOLEAN (WINAPI *rtlGenRandomFunc)(PVOID, ULONG);

static rtlGenRandomFunc rtlGenRandom;

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	if (rtlGenRandom == NULL) {
		HMODULE advapi = LoadLibraryA("advapi32.dll");
		if (advapi == NULL)
			return FALSE;
		rtlGenRandom = (rtlGenRandomFunc)(void *)GetProcAddress(advapi, "SystemFunction036");
		if (rtlGenRandom == NULL)
			return FALSE;
	}
	while (len > 0) {
		ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
		if (!rtlGenRandom(data, chunk))
			return FALSE;
		data += chunk;
		len -= chunk;
	}
	return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
	(void)inst;
	(void)reason;
	(void)reserved;
	return TRUE;
}
