import Foundation
import HomeModel
import Simulator
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant

/// The devices of issue 26, built as their `/accessories` describe them.
extension HomeAssistantCommandsTests {
    /// The devices the issue names, as their dumps describe them: a humidifier that only
    /// humidifies (its mode narrowed to 1…1), a fan in speed steps of 25, a heater-cooler, a
    /// colour bulb whose hue stops at 359 and whose colour temperature has no bounds of its own.
    static func issueDevices() throws -> [Accessory] {
        func c(
            _ name: String, _ iid: UInt64, min: Double? = nil, max: Double? = nil, step: Double? = nil,
            noBounds: Bool = false, unnamed: Bool = false
        ) throws -> Characteristic {
            var made = try HomeAssistantDevicesTests.characteristic(name, iid)
            if let min { made.metadata.minValue = min }
            if let max { made.metadata.maxValue = max }
            if let step { made.metadata.minStep = step }
            // A dump's valid values are numbers without names, when it lists them at all.
            if unnamed { made.metadata.validValues = [:] }
            if noBounds {
                made.metadata.minValue = nil
                made.metadata.maxValue = nil
            }
            return made
        }
        func device(_ id: String, _ name: String, _ service: String, _ characteristics: [Characteristic]) throws
            -> Accessory
        {
            let type = try XCTUnwrap(Catalog.serviceType(named: service))
            let info = try AccessoryService(
                iid: 1, type: StandardUUID.accessoryInformation,
                characteristics: [c("name", 2), c("manufacturer", 3), c("identify", 4)])
            return Accessory(
                id: id, name: name, manufacturer: "Issue", model: "26", serialNumber: id, firmwareRevision: "1",
                services: [info, AccessoryService(iid: 9, type: type.uuid, characteristics: characteristics)])
        }
        // An ecobee room sensor (two services, each with the same status characteristics) and a
        // Hue dimmer switch (buttons named after the device).
        let info = try AccessoryService(
            iid: 1, type: StandardUUID.accessoryInformation, characteristics: [c("name", 2), c("identify", 3)])
        func service(_ type: String, _ iid: UInt64, _ name: String, _ characteristics: [String]) throws
            -> AccessoryService
        {
            let kind = try XCTUnwrap(Catalog.serviceType(named: type))
            return AccessoryService(
                iid: iid, type: kind.uuid, name: name,
                characteristics: try characteristics.enumerated().map { try c($0.element, iid + 1 + UInt64($0.offset)) }
            )
        }
        let ecobee = Accessory(
            id: "ecobee-sensor", name: "Bedroom", manufacturer: "ecobee", model: "EBRSE4", serialNumber: "E1",
            firmwareRevision: "1",
            services: [
                info,
                try service(
                    "temperature-sensor", 10, "Bedroom", ["current-temperature", "status-low-battery", "status-active"]),
                try service(
                    "occupancy-sensor", 20, "Bedroom", ["occupancy-detected", "status-low-battery", "status-active"]),
            ])
        let dimmer = Accessory(
            id: "hue-dimmer", name: "Hue dimmer switch", manufacturer: "Philips", model: "RWL021",
            serialNumber: "H1", firmwareRevision: "1",
            services: try [info]
                + (1...4).map { n in
                    try service(
                        "stateless-programmable-switch", UInt64(10 * n), "Hue dimmer switch button \(n)",
                        ["input-event"])
                })
        return [
            ecobee, dimmer,
            try device(
                "lock", "Dump Lock", "lock-mechanism",
                [
                    c("lock-current-state", 10, unnamed: true), c("lock-target-state", 11, unnamed: true),
                ]),
            try device(
                "door", "Dump Garage", "garage-door-opener",
                [
                    c("current-door-state", 10, unnamed: true), c("target-door-state", 11, unnamed: true),
                    c("obstruction-detected", 12),
                ]),
            try device(
                "alarm", "Dump Alarm", "security-system",
                [
                    c("current-security-system-state", 10, unnamed: true),
                    c("target-security-system-state", 11, unnamed: true),
                ]),
            try device(
                "vocolinc", "VOCOlinc Humidifier", "humidifier-dehumidifier",
                [
                    c("active", 10), c("current-relative-humidity", 11), c("current-humidifier-dehumidifier-state", 12),
                    c("target-humidifier-dehumidifier-state", 13, min: 1, max: 1),
                    c("relative-humidity-humidifier-threshold", 14), c("water-level", 15),
                ]),
            try device(
                "hunter", "Hunter Fan", "fanv2",
                [c("active", 10), c("rotation-speed", 11, min: 0, max: 100, step: 25), c("rotation-direction", 12)]),
            try device(
                "heater", "Heat Pump", "heater-cooler",
                [
                    c("active", 10), c("current-heater-cooler-state", 11), c("target-heater-cooler-state", 12),
                    c("current-temperature", 13), c("heating-threshold", 14, min: 0, max: 25),
                    c("cooling-threshold", 15, min: 10, max: 35), c("rotation-speed", 16),
                ]),
            try device(
                "bulb", "Colour Bulb", "lightbulb",
                [
                    c("power-state", 10), c("brightness", 11), c("hue", 12, max: 359),
                    c("saturation", 13), c("color-temperature", 14, noBounds: true),
                ]),
        ]
    }

    /// The devices of issue 43, from a real Home Assistant's run: thermostats whose target
    /// temperature is on a grid not of whole numbers from 0 (4.5…32 in steps of 1, 2 and 5; 10…32
    /// in steps of 5), a Hunter SIMPLEconnect fan's light, whose brightness goes in steps of 10, and
    /// a valve and a light whose entities' names began with the device's last word.
    static func issue43Devices() throws -> [Accessory] {
        func c(_ name: String, _ iid: UInt64, min: Double? = nil, max: Double? = nil, step: Double? = nil) throws
            -> Characteristic
        {
            var made = try HomeAssistantDevicesTests.characteristic(name, iid)
            if let min { made.metadata.minValue = min }
            if let max { made.metadata.maxValue = max }
            if let step { made.metadata.minStep = step }
            return made
        }
        func device(_ id: String, _ name: String, _ service: String, _ characteristics: [Characteristic]) throws
            -> Accessory
        {
            let type = try XCTUnwrap(Catalog.serviceType(named: service))
            let info = try AccessoryService(
                iid: 1, type: StandardUUID.accessoryInformation,
                characteristics: [c("name", 2), c("manufacturer", 3), c("identify", 4)])
            return Accessory(
                id: id, name: name, manufacturer: "Issue", model: "43", serialNumber: id, firmwareRevision: "1",
                services: [info, AccessoryService(iid: 9, type: type.uuid, characteristics: characteristics)])
        }
        /// A vendor characteristic: a standard one's metadata under a custom UUID and name.
        func custom(_ made: Characteristic, _ name: String, _ uuid: String) -> Characteristic {
            var made = made
            made.type = uuid
            made.name = name
            return made
        }
        func thermostat(_ id: String, _ name: String, min: Double, step: Double) throws -> Accessory {
            try device(
                id, name, "thermostat",
                [
                    c("current-heating-cooling-state", 10), c("target-heating-cooling-state", 11),
                    c("current-temperature", 12), c("target-temperature", 13, min: min, max: 32, step: step),
                    c("temperature-display-units", 14),
                ])
        }
        /// A service of its own kind beside the device's main one.
        func adding(_ accessory: Accessory, _ type: String, _ iid: UInt64, _ characteristics: [Characteristic]) throws
            -> Accessory
        {
            var accessory = accessory
            let kind = try XCTUnwrap(Catalog.serviceType(named: type))
            accessory.services.append(AccessoryService(iid: iid, type: kind.uuid, characteristics: characteristics))
            return accessory
        }
        return [
            // A thermostat that only heats (its mode narrowed to 1…1), with a display unit.
            try device(
                "thermostat-heat", "Thermostat Heat Only", "thermostat",
                [
                    c("current-heating-cooling-state", 10), c("target-heating-cooling-state", 11, min: 1, max: 1),
                    c("current-temperature", 12), c("target-temperature", 13), c("temperature-display-units", 14),
                ]),
            // Settings among the controls: a child lock, key sounds, a button's label and its namespace.
            try adding(
                try device(
                    "hall-dimmer", "Hall Dimmer", "stateless-programmable-switch",
                    [c("input-event", 10), c("service-label-index", 11)]),
                "service-label", 20, [c("service-label-namespace", 21)]),
            try device(
                "heater-lock", "Panel Heater", "switch",
                [c("power-state", 10), c("lock-physical-controls", 11), c("audio-feedback", 12)]),
            try thermostat("thermostat-1", "Thermostat Step One", min: 4.5, step: 1),
            try thermostat("thermostat-2", "Thermostat Step Two", min: 4.5, step: 2),
            try thermostat("thermostat-5", "Thermostat Step Five", min: 4.5, step: 5),
            try thermostat("thermostat-10", "Thermostat From Ten", min: 10, step: 5),
            try device(
                "hunter-light", "Hunter SIMPLEconnect", "lightbulb",
                [c("power-state", 10), c("brightness", 11, min: 0, max: 100, step: 10)]),
            // Names that said a word twice: "Garden Valve Valve type", "Mood Light Light effect mode".
            try device(
                "garden-valve", "Garden Valve", "valve",
                [c("active", 10), c("in-use", 11), c("valve-type", 12)]),
            try device(
                "mood-light", "Mood Light", "lightbulb",
                [
                    c("power-state", 10),
                    custom(c("brightness", 11), "Light effect mode", "D1A0E5C1-6B8F-4E0B-9B65-2F6C1E0A7701"),
                    custom(c("power-state", 12), "Light effect flag", "D1A0E5C1-6B8F-4E0B-9B65-2F6C1E0A7702"),
                ]),
        ]
    }
}
