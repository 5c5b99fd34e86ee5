import Testing

@testable import HomeAssistant

/// The words of a name, which entity names are compared by: the ASCII path by bytes says what
/// the path by characters says, and a name with other letters goes by characters.
@Suite struct HomeAssistantWordsTests {
    @Test(arguments: [
        "Living Room Lamp", "lamp-1", "Lamp_2 (left)", "  Bedroom  temperature ", "", "---", "A1b2C3",
        "Hue/Saturation", "CO2 level", "Z", "9", "a.b,c;d:e!f?g'h\"i", "Tab\tand\nnewline", "MiXeD cAsE 42",
    ])
    func asciiNamesSplitAsCharactersDo(name: String) {
        #expect(HomeAssistantComponents.words(name) == HomeAssistantComponents.wordsOfAnyText(name))
    }

    /// Every ASCII byte between two letters: a separator exactly when it is neither letter nor digit.
    @Test func everyASCIIByte() {
        for byte in UInt8(0)...0x7F {
            let name = "a" + String(UnicodeScalar(byte)) + "b"
            #expect(
                HomeAssistantComponents.words(name) == HomeAssistantComponents.wordsOfAnyText(name),
                "byte \(byte)")
        }
    }

    @Test func otherLettersGoByCharacters() {
        #expect(HomeAssistantComponents.words("Küche Licht") == ["küche", "licht"])
        #expect(HomeAssistantComponents.words("ÉTAGE 2·Salon") == ["étage", "2", "salon"])
    }
}
