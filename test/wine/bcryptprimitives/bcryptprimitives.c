/*
 * Test stand-in for Windows' bcryptprimitives.dll, for Wine 8.0 only.
 *
 * Go >= 1.22 binaries import ProcessPrng from bcryptprimitives.dll at start,
 * and Wine 8.0 has no such export, so they die before main. This DLL exports
 * ProcessPrng on top of RtlGenRandom (advapi32!SystemFunction036), which Wine
 * implements. Never ship it: real Windows has the real DLL.
 */
#include <windows.h>
#include <ntsecapi.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	/* RtlGenRandom takes a ULONG length; feed larger requests in pieces. */
	while (len > 0) {
		ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
		if (!RtlGenRandom(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
