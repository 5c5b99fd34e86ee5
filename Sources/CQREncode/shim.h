#ifndef HOMEMQTT_CQRENCODE_SHIM_H
#define HOMEMQTT_CQRENCODE_SHIM_H
// libqrencode 4: QRcode_encodeString and the QRcode it returns (a width x width byte matrix whose
// lowest bit is 1 for a dark module), for the HomeKit bridge's setup QR code (SetupQR).
#include <qrencode.h>
#endif
