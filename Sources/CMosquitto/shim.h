#ifndef HOMEMQTT_CMOSQUITTO_SHIM_H
#define HOMEMQTT_CMOSQUITTO_SHIM_H
// libmosquitto 2.0 client API and its MQTT 5 property and reason-code definitions.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
